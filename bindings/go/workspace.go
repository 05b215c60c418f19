package dp

/*
#include <dp/dp.h>
*/
import "C"

import "runtime"

// WorkspaceOptions: the zero value asks for every default.
type WorkspaceOptions struct {
	// MaxBytes caps the bytes the workspace's blobs may hold; 0: no cap of its own (the
	// process's memory limit still bounds host memory; see dp.h, "Memory").
	MaxBytes uint64
}

// Workspace holds named blobs that nets read and write. Feed, Fetch,
// HasBlob and ListBlobs (and the checkpoint and loader calls) may be called
// from any number of goroutines at once, on the same blob or on different
// ones, also while nets that only read those blobs run; a blob that a
// running net reads must not be fed, nor one that it writes fed or fetched
// (dp.h, "Workspaces"). The workspace lives until it is closed and every net
// created in it is closed (nets keep it alive).
type Workspace struct {
	r ref[C.dp_workspace]
}

func (w *Workspace) get() (*C.dp_workspace, func(), error) {
	if w == nil {
		return nil, noop, nil
	}
	p, err := w.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, w.r.release, nil
}

// NewWorkspace creates a workspace; opts nil means every default.
func NewWorkspace(opts *WorkspaceOptions) (*Workspace, error) {
	var out *C.dp_workspace
	var s *C.dp_status
	if opts == nil {
		s = C.dp_workspace_create(&out)
	} else {
		var c C.dp_workspace_options
		C.dp_workspace_options_init(&c, C.sizeof_dp_workspace_options)
		c.max_bytes = C.uint64_t(opts.MaxBytes)
		s = C.dp_workspace_create_with_options(&c, &out)
	}
	if err := statusErr(s); err != nil {
		return nil, err
	}
	w := &Workspace{}
	w.r.set(out, "Workspace", func(p *C.dp_workspace) { C.dp_workspace_free(p) })
	runtime.SetFinalizer(w, func(w *Workspace) { w.r.close() })
	return w, nil
}

// Close releases the workspace (nets created in it keep it alive).
// Idempotent.
func (w *Workspace) Close() {
	if w != nil {
		w.r.close()
	}
}

// Feed makes blob name share t's data (no copy). t may be closed at once.
func (w *Workspace) Feed(name string, t *Tensor) error {
	wp, wdone, err := w.get()
	if err != nil {
		return err
	}
	defer wdone()
	tp, tdone, err := t.get()
	if err != nil {
		return err
	}
	defer tdone()
	cn, err := cString("dp.Workspace.Feed: blob name", name)
	if err != nil {
		return err
	}
	defer freeStr(cn)
	return statusErr(C.dp_workspace_feed(wp, cn, tp))
}

// FeedValues feeds a copy of data with the given dims as blob name.
func FeedValues[T Element](w *Workspace, name string, dims []int64, data []T) error {
	t, err := NewTensorOf(dims, data)
	if err != nil {
		return err
	}
	defer t.Close()
	return w.Feed(name, t)
}

// Fetch returns the tensor in blob name (no copy; later runs do not change
// it). Close it when done.
func (w *Workspace) Fetch(name string) (*Tensor, error) {
	wp, done, err := w.get()
	if err != nil {
		return nil, err
	}
	defer done()
	cn, err := cString("dp.Workspace.Fetch: blob name", name)
	if err != nil {
		return nil, err
	}
	defer freeStr(cn)
	var out *C.dp_tensor
	if err := statusErr(C.dp_workspace_fetch(wp, cn, &out)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// FetchValues copies blob name's elements into a []T and returns its dims.
func FetchValues[T Element](w *Workspace, name string) ([]T, []int64, error) {
	t, err := w.Fetch(name)
	if err != nil {
		return nil, nil, err
	}
	defer t.Close()
	v, err := TensorValues[T](t)
	if err != nil {
		return nil, nil, err
	}
	return v, t.Dims(), nil
}

// HasBlob reports whether blob name exists and holds something.
func (w *Workspace) HasBlob(name string) (bool, error) {
	wp, done, err := w.get()
	if err != nil {
		return false, err
	}
	defer done()
	cn, err := cString("dp.Workspace.HasBlob: blob name", name)
	if err != nil {
		return false, err
	}
	defer freeStr(cn)
	var has C.int32_t
	if err := statusErr(C.dp_workspace_has_blob(wp, cn, &has)); err != nil {
		return false, err
	}
	return has != 0, nil
}

// ListBlobs returns the sorted names of the non-empty blobs starting with
// prefix ("" for all).
func (w *Workspace) ListBlobs(prefix string) ([]string, error) {
	wp, done, err := w.get()
	if err != nil {
		return nil, err
	}
	defer done()
	cp, err := cString("dp.Workspace.ListBlobs: prefix", prefix)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var out *C.dp_string_list
	if err := statusErr(C.dp_workspace_list_blobs(wp, cp, &out)); err != nil {
		return nil, err
	}
	return goStrings(out), nil
}
