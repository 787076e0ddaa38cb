// Number and text formatting for the report.

package bench

import (
	"fmt"
	"sort"
	"strings"
)

func ms(v float64) string {
	switch {
	case v < 0:
		return "−" + ms(-v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return thousands(int(v+0.5)) + " ms"
	}
}

func ns(v float64) string {
	if v >= 1000 {
		return thousands(int(v + 0.5))
	}
	return fmt.Sprintf("%.1f", v)
}

func bucket(v int64) string {
	if v < 0 {
		return "> 2 s"
	}
	return fmt.Sprintf("≤ %d ms", v)
}

func money(v float64) string {
	whole, frac, _ := strings.Cut(fmt.Sprintf("%.2f", v), ".")
	n := 0
	fmt.Sscan(whole, &n)
	return thousands(n) + "." + frac
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	out = append([]string{s}, out...)
	r := strings.Join(out, ",")
	if neg {
		r = "-" + r
	}
	return r
}

func withoutKey(m map[string]string, k string) map[string]string {
	out := map[string]string{}
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

func envLabel(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return " (" + strings.Join(kv, " ") + ")"
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
