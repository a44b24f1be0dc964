//go:build race

package jitterretry_test

// raceEnabled: the race detector slows the long-running tests tenfold.
const raceEnabled = true
