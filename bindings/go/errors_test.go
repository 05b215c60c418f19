package dp_test

import (
	"errors"
	"testing"

	"dp.dev/dp"
)

// TestErrorMapping: bad inputs give Go errors with dp's code, never a crash.
func TestErrorMapping(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	mdef := netdef(t, mlpJSON)
	defer mdef.Close()
	mlp, err := dp.NewNet(ws, mdef, nil)
	must(t, err)
	defer mlp.Close()

	closedWS, _ := dp.NewWorkspace(nil)
	closedWS.Close()
	closedWS.Close() // idempotent
	closedDef := netdef(t, initJSON)
	closedDef.Close()

	cases := []struct {
		name string
		err  error
		want error
	}{
		{"bad JSON", func() error { _, err := dp.NetDefFromJSON([]byte(`{"ops":[`)); return err }(), dp.ErrParse},
		{"unknown op", func() error {
			_, err := dp.NetDefFromJSON([]byte(`{"ops":[{"type":"NoSuchOp","outputs":["y"]}]}`))
			return err
		}(), dp.ErrInvalidNet},
		{"missing input", mlp.Run(), dp.ErrNotFound},
		{"wrong dtype fed", func() error {
			idef := netdef(t, initJSON)
			defer idef.Close()
			in, err := dp.NewNet(ws, idef, nil)
			must(t, err)
			defer in.Close()
			must(t, in.Run())
			must(t, dp.FeedValues(ws, "data", []int64{3, 4}, make([]int32, 12)))
			return mlp.Run()
		}(), dp.ErrDType},
		{"wrong shape fed", func() error {
			must(t, dp.FeedValues(ws, "data", []int64{3, 5}, make([]float32, 15)))
			return mlp.Run()
		}(), dp.ErrShape},
		{"fetch missing blob", func() error { _, err := ws.Fetch("nope"); return err }(), dp.ErrNotFound},
		{"nil tensor fed", ws.Feed("x", nil), dp.ErrInvalidArgument},
		{"nil workspace", func() error { _, err := dp.NewNet(nil, mdef, nil); return err }(), dp.ErrInvalidArgument},
		{"nil net run", (*dp.Net)(nil).Run(), dp.ErrInvalidArgument},
		{"closed workspace", func() error { _, err := dp.NewNet(closedWS, mdef, nil); return err }(), dp.ErrClosed},
		{"closed netdef", func() error { _, err := closedDef.ToJSON(); return err }(), dp.ErrClosed},
		{"tensor data size", func() error { _, err := dp.NewTensor(dp.Float32, []int64{2}, make([]byte, 7)); return err }(), dp.ErrShape},
		{"bad model", func() error { _, err := dp.ModelFromJSON([]byte("{")); return err }(), dp.ErrParse},
		{"model file missing", func() error { _, err := dp.ModelFromFile("/nonexistent/m.json"); return err }(), dp.ErrNotFound},
		{"bad model list", func() error {
			m, err := dp.ModelFromJSON([]byte(modelJSON))
			must(t, err)
			defer m.Close()
			_, err = m.Blobs(99)
			return err
		}(), dp.ErrInvalidArgument},
		{"negative prune", dp.PruneCheckpoints(t.TempDir(), -1), dp.ErrInvalidArgument},
		{"bad net options", func() error {
			_, err := dp.NewNet(ws, mdef, &dp.NetOptions{NumWorkers: 5000})
			return err
		}(), dp.ErrInvalidArgument},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
		var de *dp.Error
		if !errors.As(c.err, &de) || de.Message() == "" || de.Code() == dp.CodeOK {
			t.Errorf("%s: not a *dp.Error with a message: %#v", c.name, c.err)
		}
	}
	// A sentinel matches only its own code; ErrClosed only closed handles.
	if errors.Is(dp.ErrNotFound, dp.ErrParse) || errors.Is(cases[0].err, dp.ErrClosed) {
		t.Fatal("sentinels too loose")
	}
	// The wrong-dtype error names the op and the blob, as the C API does.
	if m := cases[3].err.Error(); !contains(m, "FC") || !contains(m, "'data'") {
		t.Errorf("message %q", m)
	}
	// Use after Close on every handle kind: errors, not crashes.
	n, err := dp.NewNet(ws, mdef, nil)
	must(t, err)
	n.Close()
	n.Close()
	if !errors.Is(n.Run(), dp.ErrClosed) || !errors.Is(n.RunAsync(), dp.ErrClosed) || !errors.Is(n.Wait(0), dp.ErrClosed) {
		t.Fatal("closed net")
	}
	n.Cancel()
	tn, _ := dp.NewTensorOf([]int64{1}, []float32{1})
	tn.Close()
	if _, err := tn.Bytes(); !errors.Is(err, dp.ErrClosed) || tn.NumElements() != 0 || tn.Dims() != nil {
		t.Fatal("closed tensor")
	}
	if err := ws.Feed("x", tn); !errors.Is(err, dp.ErrClosed) {
		t.Fatal("feed closed tensor", err)
	}
	if closedDef.NumOps() != 0 || closedDef.Name() != "" || closedDef.Ops() != nil {
		t.Fatal("closed netdef getters")
	}
	m, _ := dp.ModelFromJSON([]byte(modelJSON))
	m.Close()
	if _, err := m.BuildTraining(nil); !errors.Is(err, dp.ErrClosed) || m.Name() != "" {
		t.Fatal("closed model")
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}
