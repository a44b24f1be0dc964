package fault_test

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jitterretry/jitterretry/examples/internal/fault"
)

// Every test of the package, the fault matrix included, must leave no
// goroutine behind: clients close their connections, servers and proxies
// are closed, and no HTTP goroutine is ignored.
//
// One exception, toxiproxy's own: in v2.5.0, when a client closes a
// connection while a response is still in a toxic (an attempt that timed
// out mid-response), ToxicLink.write stops at the failed write without
// draining its chain, and a toxic holding more data blocks on its channel
// send for ever, with the goroutines in front of it. Those per-connection
// goroutines are ignored here; the matrix counts them (toxiproxyLeftovers),
// and the proxy tests below, where every connection ends cleanly, check
// with no exception that the wrapper leaves nothing behind.
func TestMain(m *testing.M) {
	// Toxiproxy's bandwidth toxic logs to zerolog's global logger, which
	// writes to stderr by default; the proxies themselves log nowhere.
	log.Logger = zerolog.Nop()
	goleak.VerifyTestMain(m, toxiproxyLinkLeak...)
}

var toxiproxyLinkLeak = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
}

// noLeaks checks, when the test ends, that no goroutine started during the
// test is left, toxiproxy's included.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// echoServer accepts connections on loopback and echoes what it reads,
// until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial opens a connection through p, closed when the test ends.
func dial(t *testing.T, p *fault.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.URL()[len("http://"):])
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

func startProxy(t *testing.T, toxics ...fault.Toxic) *fault.Proxy {
	t.Helper()
	noLeaks(t)
	p, err := fault.Start(echoServer(t))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	for _, tx := range toxics {
		require.NoError(t, p.Add(tx))
	}
	return p
}

func TestProxyForwardsWithoutToxics(t *testing.T) {
	c := dial(t, startProxy(t))
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf))
}

func TestProxyResetPeerResetsTheConnection(t *testing.T) {
	c := dial(t, startProxy(t, fault.Toxic{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}}))
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 5))
	assert.True(t, errors.Is(err, syscall.ECONNRESET), "expect a TCP reset, got %v", err)
}

func TestProxyLimitDataCutsTheStream(t *testing.T) {
	c := dial(t, startProxy(t, fault.Toxic{Type: "limit_data", Attributes: map[string]int64{"bytes": 3}}))
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err, "expect a clean close after the limit")
	assert.Equal(t, "hel", string(got))
}

func TestProxyTimeoutStallsTheStream(t *testing.T) {
	c := dial(t, startProxy(t, fault.Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}))
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	n, err := c.Read(make([]byte, 5))
	assert.Zero(t, n)
	assert.True(t, errors.Is(err, os.ErrDeadlineExceeded), "expect nothing to come back before the reader's deadline, got %v", err)
}

func TestProxyTinyToxicityIsKept(t *testing.T) {
	// Toxicity 0 in the struct means toxiproxy's default of 1; a tiny
	// toxicity must not be rounded up to it.
	c := dial(t, startProxy(t, fault.Toxic{Type: "limit_data", Toxicity: 1e-9, Attributes: map[string]int64{"bytes": 1}}))
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(buf))
}

func TestProxyRefusesWhatItCannotUse(t *testing.T) {
	for name, upstream := range map[string]string{
		"not loopback": "192.0.2.1:80",
		"no port":      "127.0.0.1",
		"url":          "http://192.0.2.1:8000",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fault.Start(upstream)
			assert.Error(t, err, "expect %q refused", upstream)
		})
	}
	p := startProxy(t)
	assert.Error(t, p.Add(fault.Toxic{Type: "no-such-toxic"}))
	assert.Error(t, p.Add(fault.Toxic{Type: "latency", Stream: "sideways"}))
	p.Close()
	assert.Error(t, p.Add(fault.Toxic{Type: "latency"}), "expect a closed proxy to refuse toxics")
	p.Close() // idempotent
}

func TestMatrixIsWellFormed(t *testing.T) {
	p := startProxy(t)
	seen := map[string]bool{}
	for _, f := range fault.Matrix() {
		assert.False(t, seen[f.Name], "duplicate fault %s", f.Name)
		seen[f.Name] = true
		assert.NotEmpty(t, f.Doc, f.Name)
		require.NoError(t, p.Apply(f), "expect toxiproxy to accept every toxic of %s", f.Name)
		p.Reset()
	}
	for _, name := range []string{"latency", "reset_peer", "timeout", "bandwidth", "slicer"} {
		assert.True(t, seen[name], "expect the matrix to include %s", name)
	}
}
