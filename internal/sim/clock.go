package sim

import "time"

// handler receives the events scheduled for it; arg tells it which kind of
// event, so one handler serves every message of a client or an operation and
// scheduling allocates nothing.
type handler interface {
	handle(now time.Duration, arg int)
}

type event struct {
	at  time.Duration
	seq uint64
	h   handler
	arg int
}

// scheduler is the virtual clock: a binary min-heap of events ordered by
// time, ties broken by the order they were scheduled, so a run is a pure
// function of its seeds. It is not safe for concurrent use; each run owns one.
type scheduler struct {
	now    time.Duration
	seq    uint64
	q      []event
	halted bool
}

// at schedules h.handle(t, arg). Times earlier than now are run at now, so
// time never moves backwards.
func (s *scheduler) at(t time.Duration, h handler, arg int) {
	t = max(t, s.now)
	s.seq++
	s.q = append(s.q, event{at: t, seq: s.seq, h: h, arg: arg})
	s.up(len(s.q) - 1)
}

// halt makes run return after the event being delivered; the events left
// are dropped.
func (s *scheduler) halt() { s.halted = true }

// run delivers events in time order until none is left, or until halt, and
// returns the time of the last one.
func (s *scheduler) run() time.Duration {
	for len(s.q) > 0 && !s.halted {
		e := s.q[0]
		last := len(s.q) - 1
		s.q[0] = s.q[last]
		s.q[last] = event{}
		s.q = s.q[:last]
		if last > 0 {
			s.down(0)
		}
		s.now = e.at
		e.h.handle(e.at, e.arg)
	}
	return s.now
}

func (s *scheduler) less(i, j int) bool {
	a, b := &s.q[i], &s.q[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (s *scheduler) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.q[i], s.q[p] = s.q[p], s.q[i]
		i = p
	}
}

func (s *scheduler) down(i int) {
	n := len(s.q)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.q[i], s.q[m] = s.q[m], s.q[i]
		i = m
	}
}
