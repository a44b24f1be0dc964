package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Server serves GET /metrics, in Prometheus's exposition format, for a run
// that uses several providers one after the other (the example's
// strategies, each with a fresh client and retryer): it shows the provider
// last passed to Show.
type Server struct {
	srv     *http.Server
	addr    string
	current atomic.Pointer[Metrics]
}

// Listen starts serving on addr ("127.0.0.1:0" picks a free port; Addr
// tells which). Until Show is called, /metrics answers 503.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		m := s.current.Load()
		if m == nil {
			http.Error(w, "no run has started yet", http.StatusServiceUnavailable)
			return
		}
		m.Handler().ServeHTTP(w, r)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Show makes /metrics serve m's metrics from now on.
func (s *Server) Show(m *Metrics) { s.current.Store(m) }

// Close stops the server, letting a scrape in progress finish for up to a
// second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return s.srv.Close()
	}
	return err
}
