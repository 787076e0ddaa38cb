package secretref

import (
	"net/url"
	"strings"
	"testing"
)

// A binding matches a URL's host exactly (case and a trailing dot aside),
// its port when it names one, and the most specific KEY decides: no
// substring, suffix or wildcard match, and a secret no rule covers may be
// sent nowhere.
func TestBindingsMatchTheExactHost(t *testing.T) {
	b, err := ParseBindings(" wsfleet/prod/ = Stream.Example.com , [2001:db8::1]:8443 ; wsfleet/prod/bank=api.bank.example:443;wsfleet/prod/a=b=c.example;")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url string
		want      bool
	}{
		{"wsfleet/prod/feed", "wss://stream.example.com/x", true},
		{"wsfleet/prod/feed", "ws://STREAM.example.com.:9000/x", true},
		{"wsfleet/prod/feed", "wss://[2001:db8::1]:8443/", true},
		{"wsfleet/prod/feed", "wss://[2001:db8::1]/", false},
		{"wsfleet/prod/feed", "wss://evil.example/?h=stream.example.com", false},
		{"wsfleet/prod/feed", "wss://stream.example.com.evil.example/", false},
		{"wsfleet/prod/feed", "wss://xstream.example.com/", false},
		{"wsfleet/prod/feed", "wss://sub.stream.example.com/", false},
		{"wsfleet/prod/bank", "wss://api.bank.example/", true},
		{"wsfleet/prod/bank", "ws://api.bank.example/", false},     // port 80, the rule says 443
		{"wsfleet/prod/bank", "wss://stream.example.com/", false},  // its own rule, not the folder's
		{"wsfleet/prod/bank/x", "wss://stream.example.com/", true}, // not the name: the folder's
		{"wsfleet/prod/a=b", "wss://c.example/", true},             // the rule's '=' is its last
		{"wsfleet/dev/feed", "wss://stream.example.com/", false},   // no rule
		{"wsfleet/prod/", "wss://stream.example.com/", false},      // the folder itself is no secret
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Allows(tc.name, u); got != tc.want {
			t.Errorf("Allows(%q, %s) = %v, want %v", tc.name, tc.url, got, tc.want)
		}
	}
	var zero Bindings
	if u, _ := url.Parse("wss://stream.example.com/"); zero.Allows("wsfleet/prod/feed", u) {
		t.Error("the zero Bindings allow a secret")
	}
	u, _ := url.Parse("wss://evil.example/")
	err = b.Check(`{"k":"{{secret:wsfleet/prod/feed}}"}`, u)
	if err == nil || !strings.Contains(err.Error(), `secret reference 1 (at byte 6): secret "wsfleet/prod/feed": may not be sent to this host`) {
		t.Errorf("Check = %v", err)
	}
}

// ParseBindings reports every problem at once, each naming its rule.
func TestParseBindingsReportsEveryProblem(t *testing.T) {
	_, err := ParseBindings("p/=*.example.com;p/=a.example;q/;r/=;s/=h.example:0,wss://h.example/x;t t/=h.example;u/=[::1")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"WSFLEET_SECRET_HOSTS", `rule 1: key "p/": host "*.example.com"`, `rule 2: key "p/" is given twice`,
		`rule 3: "q/" is not KEY=HOST`, `rule 4: key "r/": an empty host`, `rule 5: key "s/": host "h.example:0": the port`,
		`rule 5: key "s/": host "wss://h.example/x"`, `rule 6: key "t t/" has a character`, `rule 7: key "u/": host "[::1": an unclosed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nwant %q", err, want)
		}
	}
	if b, err := ParseBindings(" ; "); err != nil || !b.IsZero() {
		t.Errorf("ParseBindings(\" ; \") = %v, %v", b, err)
	}
}
