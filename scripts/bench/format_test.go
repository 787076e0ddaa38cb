package bench

import "testing"

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{ms(3.456), "3.46 ms"}, {ms(45.67), "45.7 ms"}, {ms(10512.4), "10,512 ms"}, {ms(-40), "−40.0 ms"},
		{thousands(1234567), "1,234,567"}, {thousands(-1000), "-1,000"}, {thousands(12), "12"},
		{money(1478.25), "1,478.25"}, {money(2.999), "3.00"}, {bucket(-1), "> 2 s"}, {bucket(5), "≤ 5 ms"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
