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
// A request that is not understood is answered 400 with a JSON reason
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
	var err error
	switch {
	case path == "" && r.Method == http.MethodGet:
		writeJSON(w, controls)
		return
	case path == "lag" && post:
		err = m.LagEpisode(dur("lag"), dur("for"))
	case path == "storm" && post:
		var kind Fault
		if kind, err = ParseFault(q.Get("kind")); err == nil {
			err = m.Storm(kind, num("share"), dur("for"))
		}
	case path == "hold" && post:
		m.HoldTable(q.Get("table"), num("fraction"), dur("for"))
	case path == "hotkey" && post:
		if q.Get("table") == "" || q.Get("key") == "" {
			panic(controlError{"table", "hotkey needs table and key"})
		}
		m.HotKey(q.Get("table"), q.Get("key"), num("fraction"), dur("for"))
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
	w.WriteHeader(http.StatusNoContent)
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
