//go:build !race

package jitterretry_test

const raceEnabled = false
