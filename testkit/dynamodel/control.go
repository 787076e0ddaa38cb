package dynamodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The control endpoints, for a model running in its own process
// (cmd/dynamodel) that the chaos harness drives. They live under
// /dynamodel/ on the model's own port (DynamoDB requests are POST /):
//
//	POST /dynamodel/lag?lag=30s&for=1m                        Model.LagEpisode
//	POST /dynamodel/storm?kind=after&share=0.5&for=1m          Model.Storm
//	POST /dynamodel/hold?fraction=0.1&for=1m[&table=T]         Model.HoldTable
//	POST /dynamodel/hotkey?table=T&key=K&fraction=0.1&for=1m   Model.HotKey
//	GET  /dynamodel/meter                                      Model.Meter (JSON)
//	GET  /dynamodel/status                                     the profile and Pending (JSON)
//	GET  /dynamodel/                                           this list (JSON)
//
// A POST that took effect is answered 200 with JSON saying what is now in
// effect and until when (controlAnswer), e.g. for hold?fraction=0.1&for=1m
// {"control":"hold","in_effect":{"fraction":0.1,"table":"*"},"for":"1m0s","until":"2026-12-04T08:01:00Z"}
// ("*": every table). A request that is not understood is answered 400 with a JSON reason
// naming the parameter: a fraction or share outside 0..1, a negative
// duration, a parameter the control does not take.
const controlPrefix = "/dynamodel/"

// controls are the endpoints and the parameters each takes (GET
// /dynamodel/ lists them; any other parameter is refused).
var controls = []struct {
	Method string   `json:"method"`
	Path   string   `json:"path"`
	Params []string `json:"params,omitempty"`
	Does   string   `json:"does"`
}{
	{"POST", controlPrefix + "lag", []string{"lag", "for"}, "index queries and eventually consistent reads answer from a state lag old, for a while"},
	{"POST", controlPrefix + "storm", []string{"kind", "share", "for"}, "a share (0..1) of requests fail with a fault kind, for a while"},
	{"POST", controlPrefix + "hold", []string{"fraction", "for", "table"}, "the table's (or every table's) capacity held to a fraction (0..1), for a while"},
	{"POST", controlPrefix + "hotkey", []string{"table", "key", "fraction", "for"}, "one key's capacity held to a fraction (0..1), for a while"},
	{"GET", controlPrefix + "meter", nil, "the units and faults per table and operation"},
	{"GET", controlPrefix + "status", nil, "the profile and what is pending"},
}

func (m *Model) control(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dur := func(name string) time.Duration {
		d, err := time.ParseDuration(q.Get(name))
		if err != nil || d < 0 {
			panic(controlError{name, fmt.Sprintf("not a duration >= 0: %q", q.Get(name))})
		}
		return d
	}
	num := func(name string) float64 {
		f, err := strconv.ParseFloat(q.Get(name), 64)
		if err != nil || f < 0 || f > 1 {
			panic(controlError{name, fmt.Sprintf("not a number within 0..1: %q", q.Get(name))})
		}
		return f
	}
	defer func() {
		if v := recover(); v != nil {
			e, ok := v.(controlError)
			if !ok {
				panic(v)
			}
			writeRefusal(w, e)
		}
	}()
	post := r.Method == http.MethodPost
	path := r.URL.Path[len(controlPrefix):]
	for _, c := range controls {
		if c.Path == r.URL.Path {
			for k := range q {
				if !slices.Contains(c.Params, k) {
					panic(controlError{k, fmt.Sprintf("unknown parameter for %s (it takes %s)", c.Path, strings.Join(c.Params, ", "))})
				}
			}
		}
	}
	var (
		err    error
		effect map[string]any
		d      time.Duration
	)
	switch {
	case path == "" && r.Method == http.MethodGet:
		writeJSON(w, controls)
		return
	case path == "lag" && post:
		lag := dur("lag")
		d = dur("for")
		err = m.LagEpisode(lag, d)
		effect = map[string]any{"lag": lag.String()}
	case path == "storm" && post:
		var kind Fault
		if kind, err = ParseFault(q.Get("kind")); err == nil {
			share := num("share")
			d = dur("for")
			err = m.Storm(kind, share, d)
			effect = map[string]any{"kind": kind, "share": share}
		}
	case path == "hold" && post:
		table, fraction := q.Get("table"), num("fraction")
		d = dur("for")
		m.HoldTable(table, fraction, d)
		if table == "" {
			table = "*"
		}
		effect = map[string]any{"table": table, "fraction": fraction}
	case path == "hotkey" && post:
		if q.Get("table") == "" || q.Get("key") == "" {
			panic(controlError{"table", "hotkey needs table and key"})
		}
		fraction := num("fraction")
		d = dur("for")
		m.HotKey(q.Get("table"), q.Get("key"), fraction, d)
		effect = map[string]any{"table": q.Get("table"), "key": q.Get("key"), "fraction": fraction}
	case path == "meter":
		writeJSON(w, m.Meter())
		return
	case path == "status":
		writeJSON(w, map[string]any{"profile": m.prof, "pending": m.Pending(), "primary": m.primary})
		return
	default:
		http.Error(w, "unknown control "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	if err != nil {
		writeRefusal(w, controlError{Reason: err.Error()})
		return
	}
	writeJSON(w, controlAnswer{Control: path, InEffect: effect, For: d.String(), Until: time.Now().Add(d).UTC().Truncate(time.Millisecond)})
}

// controlAnswer is a POST's answer: the control, what it put in effect (its
// parameters as the model took them) and until when.
type controlAnswer struct {
	Control  string         `json:"control"`
	InEffect map[string]any `json:"in_effect"`
	For      string         `json:"for"`
	Until    time.Time      `json:"until"`
}

// controlError is a refused control's JSON answer: the parameter and why.
type controlError struct {
	Param  string `json:"param,omitempty"`
	Reason string `json:"reason"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeRefusal answers 400 with the refusal as JSON.
func writeRefusal(w http.ResponseWriter, e controlError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(e)
}
