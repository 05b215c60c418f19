package dp

import "sync"

// ref owns one C handle. Calls acquire it for their duration; close marks
// it closed and frees it at once, or, when calls are in flight, as the last
// of them releases it. So Close never blocks and never frees a handle that
// a C call is using, and no lock is held across C calls (no lock-order
// deadlocks between handles).
type ref[T any] struct {
	mu      sync.Mutex
	p       *T
	users   int
	closing bool
	kind    string
	free    func(*T)
}

func (r *ref[T]) set(p *T, kind string, free func(*T)) {
	r.p, r.kind, r.free = p, kind, free
}

func (r *ref[T]) acquire() (*T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil || r.closing {
		return nil, closedErr(r.kind)
	}
	r.users++
	return r.p, nil
}

func (r *ref[T]) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users--
	if r.closing && r.users == 0 && r.p != nil {
		r.free(r.p)
		r.p = nil
	}
}

func (r *ref[T]) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return
	}
	r.closing = true
	if r.users == 0 && r.p != nil {
		r.free(r.p)
		r.p = nil
	}
}

// take detaches the handle (ownership passes elsewhere); nil if closed or
// in use.
func (r *ref[T]) take() *T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing || r.users != 0 {
		return nil
	}
	p := r.p
	r.p, r.closing = nil, true
	return p
}

func noop() {}
