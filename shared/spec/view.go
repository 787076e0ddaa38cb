package spec

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
)

// View is a spec as GET shows it: ws_url with its query values redacted,
// header names only, open messages, the application ping and the
// keep-alive reply by kind and size (each may carry credentials), and every
// default spelled out.
type View struct {
	WSURL       string   `json:"ws_url"`
	HeaderNames []string `json:"header_names,omitempty"`
	// SecretRefs are the secret references (shared/secretref) the headers
	// and open messages carry, each once, sorted: the names of the
	// secrets the worker resolves at every dial, never their values.
	SecretRefs       []string `json:"secret_refs,omitempty"`
	SeqField         string   `json:"seq_field"`
	ResumeQueryParam string   `json:"resume_query_param,omitempty"`
	// The source protocol; open messages by kind and size only.
	SeqPath        string            `json:"seq_path,omitempty"`
	SeqMode        string            `json:"seq_mode"`
	OnMissingSeq   string            `json:"on_missing_seq,omitempty"`
	OnSinkRefusal  string            `json:"on_sink_refusal"`
	Resume         *Resume           `json:"resume,omitempty"`
	OpenMessages   []OpenMessageInfo `json:"open_messages,omitempty"`
	AppPing        *AppPingInfo      `json:"app_ping,omitempty"`
	KeepaliveReply *KeepaliveInfo    `json:"keepalive_reply,omitempty"`
	IdleTimeout    string            `json:"idle_timeout,omitempty"`
	// Planned reconnects; SwitchTimeout is spelled out when either is set.
	MaxConnectionAge string              `json:"max_connection_age,omitempty"`
	ReconnectOn      *source.ReconnectOn `json:"reconnect_on,omitempty"`
	SwitchTimeout    string              `json:"switch_timeout,omitempty"`
	// The settings, as stored (an absent one: its default).
	Settings
	Standby *StandbyView `json:"standby,omitempty"` // absent: no standby
}

// OpenMessageInfo is an open message as the API shows it: its kind and
// size, never its content (it may carry credentials), and its wait_for.
type OpenMessageInfo struct {
	Kind    string        `json:"kind"` // text | binary
	Bytes   int           `json:"bytes"`
	WaitFor *source.Match `json:"wait_for,omitempty"`
}

// AppPingInfo is app_ping as the API shows it: the message's kind and
// size, never its text (an application ping may carry a token, as open
// messages may), the interval, and the size of the pong it expects.
type AppPingInfo struct {
	Kind      string `json:"kind"` // text
	Bytes     int    `json:"bytes"`
	Every     string `json:"every"`
	PongBytes int    `json:"pong_bytes,omitempty"`
}

// KeepaliveInfo is keepalive_reply as the API shows it: its match, and the
// reply's kind and size, never its text.
type KeepaliveInfo struct {
	Match      source.Match `json:"match"`
	ReplyKind  string       `json:"reply_kind"` // text
	ReplyBytes int          `json:"reply_bytes"`
	Deliver    bool         `json:"deliver,omitempty"`
}

// View is s (checked) as GET shows it.
func (s Spec) View() View {
	v := View{
		WSURL:         RedactURL(s.WSURL),
		SeqMode:       s.SeqMode,
		OnSinkRefusal: s.OnSinkRefusal,
		IdleTimeout:   s.IdleTimeout,
		Settings:      s.Settings,
		Standby:       s.standbyView(),
	}
	if s.Planned() {
		v.MaxConnectionAge, v.ReconnectOn, v.SwitchTimeout = s.MaxConnectionAge, s.ReconnectOn, s.SwitchDeadline().String()
	}
	if p := s.AppPing; p != nil {
		v.AppPing = &AppPingInfo{Kind: "text", Bytes: len(p.Message), Every: p.Every, PongBytes: len(p.Pong)}
	}
	if k := s.KeepaliveReply; k != nil {
		v.KeepaliveReply = &KeepaliveInfo{Match: k.Match, ReplyKind: "text", ReplyBytes: len(k.Reply), Deliver: k.Deliver}
	}
	if len(s.Headers) > 0 {
		v.HeaderNames = slices.Sorted(maps.Keys(s.Headers))
	}
	refs := map[string]bool{}
	for _, h := range s.Headers {
		for _, r := range secretref.Refs(h) {
			refs[r.String()] = true
		}
	}
	for _, m := range s.OpenMessages {
		if m.Text != nil {
			for _, r := range secretref.Refs(*m.Text) {
				refs[r.String()] = true
			}
		}
	}
	if len(refs) > 0 {
		v.SecretRefs = slices.Sorted(maps.Keys(refs))
	}
	if v.SeqMode == "" {
		v.SeqMode = source.SeqField
	}
	if v.SeqMode == source.SeqField {
		v.SeqField, v.SeqPath = s.Seq(), s.Seq()
		v.OnMissingSeq = s.OnMissingSeq
		if v.OnMissingSeq == "" {
			v.OnMissingSeq = source.MissingDrop
		}
	}
	if v.OnSinkRefusal == "" {
		v.OnSinkRefusal = source.RefusalFail
	}
	if r := s.Resume; r != nil {
		v.ResumeQueryParam = r.QueryParam
		v.Resume = &Resume{QueryParam: r.QueryParam, Value: r.Value}
		if v.Resume.Value == "" {
			v.Resume.Value = ResumeNext
		}
	}
	for _, m := range s.OpenMessages {
		info := OpenMessageInfo{Kind: "text", WaitFor: m.WaitFor}
		if m.Text != nil {
			info.Bytes = len(*m.Text)
		} else {
			b, _ := m.Bytes(source.Vars{})
			info.Kind, info.Bytes = "binary", len(b)
		}
		v.OpenMessages = append(v.OpenMessages, info)
	}
	return v
}

// Redacted stands for a removed secret.
const Redacted = "REDACTED"

// RedactURL returns raw with every query value (and every bare query
// element) replaced by REDACTED and any user info and fragment removed.
// Unparseable input is redacted whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" || u.ForceQuery {
		parts := strings.Split(u.RawQuery, "&")
		for i, kv := range parts {
			if k, _, ok := strings.Cut(kv, "="); ok {
				parts[i] = k + "=" + Redacted
			} else if kv != "" {
				parts[i] = Redacted // a bare element may itself be a token
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}
