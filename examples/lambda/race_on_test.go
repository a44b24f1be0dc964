//go:build race

package main

// raceEnabled is true when the tests run with the race detector: the
// emulator test then builds the function with it too.
const raceEnabled = true
