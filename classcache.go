package jitterretry

// This file owns the classification the SDK's middleware asks for twice:
// IsErrorRetryable and, right after it, GetRetryToken classify the same
// error value.

import "sync"

// classCache keeps the last classifications by error identity, so that
// GetRetryToken reuses what IsErrorRetryable found instead of walking the
// error's chain again. A class is a function of the error value alone, so
// entries can be shared by any operations; only pointer errors are kept,
// since other values of one type may differ. The cache has a fixed size and
// holds at most classCacheSlots errors.
const classCacheSlots = 64

type classCache struct {
	slots [classCacheSlots]classCacheSlot
}

type classCacheSlot struct {
	mu    sync.Mutex
	key   error
	class ErrorClass
	hint  retryAfter
}

// store records err's class and hint; h is keyHash(err).
func (c *classCache) store(err error, h uintptr, class ErrorClass, hint retryAfter) {
	if !isPointer(err) {
		return
	}
	s := &c.slots[h%classCacheSlots]
	s.mu.Lock()
	s.key, s.class, s.hint = err, class, hint
	s.mu.Unlock()
}

// load returns err's class and hint if they are cached.
func (c *classCache) load(err error, h uintptr) (ErrorClass, retryAfter, bool) {
	s := &c.slots[h%classCacheSlots]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil || !isPointer(err) || s.key != err {
		return 0, retryAfter{}, false
	}
	return s.class, s.hint, true
}
