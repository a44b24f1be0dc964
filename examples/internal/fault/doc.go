// Package fault puts network faults between a client and a server with
// toxiproxy (github.com/Shopify/toxiproxy/v2), run in-process as a TCP proxy
// on loopback: latency with jitter, connections reset mid-response, stalled
// connections that only a client timeout ends, bandwidth limits, and
// responses sliced into small TCP segments.
//
// Toxiproxy is used as a library rather than through its HTTP API or a
// separate process, so tests need no daemon and no port besides the proxy's
// own. Its toxics decide per connection, with their toxicity, whether they
// apply, so a client that keeps its connections alive meets a fault once
// per connection: the matrix's clients close their idle connections every
// few tens of milliseconds, so that each fault keeps striking.
//
// The matrix of faults the reliability tests run is Matrix; its tests live
// next to it.
package fault
