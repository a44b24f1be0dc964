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
// holds at most classCacheSlots errors: those IsErrorRetryable found
// retryable and no GetRetryToken has asked for yet (the last attempt's,
// which the SDK's middleware does not retry), until another error takes
// their slot.
const classCacheSlots = 64

type classCache struct {
	slots [classCacheSlots]classCacheSlot
}

type classCacheSlot struct {
	mu   sync.Mutex
	key  error
	info errorInfo
}

// store records what inspect found of err; h is keyHash(err).
func (c *classCache) store(err error, h uintptr, info errorInfo) {
	if !isPointer(err) {
		return
	}
	s := &c.slots[h%classCacheSlots]
	s.mu.Lock()
	s.key, s.info = err, info
	s.mu.Unlock()
}

// load returns what inspect found of err, if it is cached, and empties the
// slot: the error (and the response and request it holds, with the
// request's context) is not kept past the GetRetryToken that asked.
func (c *classCache) load(err error, h uintptr) (errorInfo, bool) {
	s := &c.slots[h%classCacheSlots]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil || !isPointer(err) || s.key != err {
		return errorInfo{}, false
	}
	info := s.info
	s.key, s.info = nil, errorInfo{}
	return info, true
}
