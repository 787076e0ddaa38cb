package dynamodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
//
// A request that is not understood is answered 400 with the reason.
const controlPrefix = "/dynamodel/"

func (m *Model) control(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dur := func(name string) time.Duration {
		d, err := time.ParseDuration(q.Get(name))
		if err != nil {
			panic(controlError(fmt.Sprintf("%s: %v", name, err)))
		}
		return d
	}
	num := func(name string) float64 {
		f, err := strconv.ParseFloat(q.Get(name), 64)
		if err != nil || f < 0 {
			panic(controlError(fmt.Sprintf("%s: not a number >= 0: %q", name, q.Get(name))))
		}
		return f
	}
	defer func() {
		if v := recover(); v != nil {
			e, ok := v.(controlError)
			if !ok {
				panic(v)
			}
			http.Error(w, string(e), http.StatusBadRequest)
		}
	}()
	post := r.Method == http.MethodPost
	var err error
	switch path := r.URL.Path[len(controlPrefix):]; {
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
			panic(controlError("hotkey needs table and key"))
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
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type controlError string

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
