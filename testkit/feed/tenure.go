package feed

// A connection's tenure header (Config.TenureHeader, ConnRecord.Tenure).

import (
	"strconv"
	"strings"
)

// ParseTenure splits a tenure header's "<worker id>/<lease epoch>"
// (ConnRecord.Tenure); false when it is not one.
func ParseTenure(t string) (worker string, epoch int64, ok bool) {
	i := strings.LastIndexByte(t, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(t[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return t[:i], n, true
}
