// Package listflag parses the comma-separated list flags the project's
// commands share (-clients 10,50,100, -strategies full,equal).
package listflag

import (
	"fmt"
	"strconv"
	"strings"
)

// Split returns the non-empty, space-trimmed elements of a comma-separated
// list.
func Split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// PositiveInts parses a comma-separated list of positive integers given to
// the flag -name; an empty list or a bad element is an error that names the
// flag.
func PositiveInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range Split(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("invalid -%s element %q: want a positive integer", name, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("invalid -%s %q: empty list", name, s)
	}
	return out, nil
}
