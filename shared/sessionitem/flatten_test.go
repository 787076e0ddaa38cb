package sessionitem

import "testing"

func TestFlatten(t *testing.T) {
	for in, want := range map[string]string{
		// What the builder renders for the lease store's acquire.
		"(((attribute_exists (#0)) AND (#1 = :0)) AND ((attribute_not_exists (#2)) OR (#2 <> #3))) AND ((attribute_not_exists (#4)) OR (#4 < :1))": "attribute_exists(#0) AND #1 = :0 AND (attribute_not_exists(#2) OR #2 <> #3) AND (attribute_not_exists(#4) OR #4 < :1)",
		"(#0 = :0) AND (#1 < :1)":                        "#0 = :0 AND #1 < :1",
		"((#0 = :0) OR (#1 = :1)) OR (#2 = :2)":          "#0 = :0 OR #1 = :1 OR #2 = :2",
		"(#0 = :0) OR ((#1 = :1) AND (#2 = :2))":         "#0 = :0 OR #1 = :1 AND #2 = :2",
		"NOT ((#0 = :0) AND (#1 = :1))":                  "NOT (#0 = :0 AND #1 = :1)",
		"(NOT (#0 = :0)) AND (#1 BETWEEN :1 AND :2)":     "NOT #0 = :0 AND #1 BETWEEN :1 AND :2",
		"(size (#0) > :0) AND (#1 IN (:1, :2))":          "size(#0) > :0 AND #1 IN (:1, :2)",
		"(begins_with (#0, :0)) OR (contains (#1, :1))":  "begins_with(#0, :0) OR contains(#1, :1)",
		"(#0.#1[2] >= :0) AND (attribute_type (#2, :1))": "#0.#1[2] >= :0 AND attribute_type(#2, :1)",
		"(((#0 <= :0)))":                                 "#0 <= :0",
	} {
		if got := flatten(in); got != want {
			t.Errorf("flatten(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	// What it cannot parse is left alone.
	for _, in := range []string{"(#0 = :0", "#0 = ", "#0 = :0)", "foo bar"} {
		if got := flatten(in); got != in {
			t.Errorf("flatten(%q) = %q, want it unchanged", in, got)
		}
	}
}
