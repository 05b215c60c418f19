package dp_test

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"dp.dev/dp"
	"dp.dev/dp/internal/cthread"
)

// TestLogCallback: messages reach Go, including from a thread C created.
func TestLogCallback(t *testing.T) {
	var mu sync.Mutex
	var msgs []string
	tids := map[int]bool{}
	dp.SetLogCallback(func(level dp.LogLevel, m string) {
		mu.Lock()
		defer mu.Unlock()
		if level >= dp.LogDebug && level <= dp.LogError {
			msgs = append(msgs, m)
			tids[syscall.Gettid()] = true
		}
	}, dp.LogInfo)
	defer dp.SetLogCallback(nil, dp.LogWarning)

	const js = `{"name":"logged","ops":[{"type":"ConstantFill","outputs":["y"]}]}`
	if code := cthread.CreateNetOnPthread(js); code != 0 {
		t.Fatalf("net on a C thread: code %d", code)
	}
	// And from several goroutines, each on an OS thread of its own.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ws, _ := dp.NewWorkspace(nil)
			d, _ := dp.NetDefFromJSON([]byte(js))
			n, err := dp.NewNet(ws, d, nil)
			if err == nil {
				n.Close()
			}
			d.Close()
			ws.Close()
		}()
	}
	wg.Wait()
	mu.Lock()
	named := 0
	for _, m := range msgs {
		if strings.Contains(m, "net 'logged'") {
			named++
		}
	}
	nt := len(tids)
	mu.Unlock()
	if named != 5 || nt < 2 {
		t.Fatalf("%d messages naming the net from %d threads: %q", named, nt, msgs)
	}
	// Above the level: nothing more arrives.
	dp.SetLogCallback(func(dp.LogLevel, string) { t.Error("info message at warning level") }, dp.LogWarning)
	cthread.CreateNetOnPthread(js)
}

// TestLogCallbackReentry: the callback may call dp, even calls that log
// (their messages go to stderr), and may not replace itself (an error, the
// callback stays).
func TestLogCallbackReentry(t *testing.T) {
	const js = `{"name":"reentrant","ops":[{"type":"ConstantFill","outputs":["y"]}]}`
	var got []string
	var inner error
	first := true
	must(t, dp.SetLogCallback(func(level dp.LogLevel, m string) {
		got = append(got, m)
		if first {
			first = false
			d, err := dp.NetDefFromJSON([]byte(js))
			if err == nil {
				ws, _ := dp.NewWorkspace(nil)
				if n, err := dp.NewNet(ws, d, nil); err == nil { // logs: to stderr
					n.Close()
				}
				ws.Close()
				d.Close()
			}
			inner = dp.SetLogCallback(nil, dp.LogWarning)
		}
	}, dp.LogInfo))
	defer dp.SetLogCallback(nil, dp.LogWarning)
	for i := 0; i < 2; i++ {
		if code := cthread.CreateNetOnPthread(js); code != 0 {
			t.Fatalf("net on a C thread: code %d", code)
		}
	}
	if !dp.IsCode(inner, dp.CodeFailedPrecondition) {
		t.Fatalf("SetLogCallback from the callback: %v", inner)
	}
	if len(got) != 2 {
		t.Fatalf("want the two outer messages (the callback stayed), got %q", got)
	}
}

// printerJSON: 8 independent Print ops on "x", run by the async executor.
func printerJSON() string {
	ops := strings.TrimSuffix(strings.Repeat(`{"type":"Print","inputs":["x"],"args":[{"name":"limit","i":2}]},`, 8), ",")
	return `{"name":"printer","executor":"Async","num_workers":2,"external_inputs":["x"],"ops":[` + ops + `]}`
}

// TestLogFromWorkerThreads: Print ops that the async executor's own worker
// threads run (RunAsync: the caller runs none, Wait does not help) reach the
// Go callback on those threads.
func TestLogFromWorkerThreads(t *testing.T) {
	runtime.LockOSThread() // the caller's thread id stays this goroutine's
	defer runtime.UnlockOSThread()
	caller := syscall.Gettid()
	var mu sync.Mutex
	var got []string
	tids := map[int]bool{}
	must(t, dp.SetLogCallback(func(level dp.LogLevel, m string) {
		if !strings.Contains(m, "(Print)") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m)
		tids[syscall.Gettid()] = true
	}, dp.LogInfo))
	defer dp.SetLogCallback(nil, dp.LogWarning)

	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	must(t, dp.FeedValues(ws, "x", []int64{3}, []float32{1.5, -2, 3}))
	def, err := dp.NetDefFromJSON([]byte(printerJSON()))
	must(t, err)
	defer def.Close()
	net, err := dp.NewNet(ws, def, nil)
	must(t, err)
	defer net.Close()
	must(t, net.RunAsync())
	must(t, net.Wait(60*time.Second))

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 8 || !strings.Contains(got[0], "'x' float32 [3] = [1.5, -2, ...]") {
		t.Fatalf("want 8 Print messages, got %q", got)
	}
	if tids[caller] || len(tids) == 0 {
		t.Fatalf("messages from threads %v; the caller is %d", tids, caller)
	}
}

func rssPages(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	must(t, err)
	f := strings.Fields(string(b))
	n, err := strconv.ParseInt(f[1], 10, 64)
	must(t, err)
	return n
}

// TestCreateFreeCycles: 10,000 create/free cycles of every common handle
// leave RSS flat.
func TestCreateFreeCycles(t *testing.T) {
	cycle := func() {
		ws, err := dp.NewWorkspace(nil)
		must(t, err)
		d := netdef(t, initJSON)
		n, err := dp.NewNet(ws, d, nil)
		must(t, err)
		must(t, n.Run())
		w, err := ws.Fetch("W1")
		must(t, err)
		mem := dp.AllocHostMemory(64)
		ot, err := dp.NewTensorOwned(dp.Float32, []int64{16}, mem)
		must(t, err)
		must(t, ws.Feed("o", ot))
		names, err := ws.ListBlobs("")
		must(t, err)
		if len(names) != 5 {
			t.Fatal(names)
		}
		ot.Close()
		w.Close()
		n.Close()
		d.Close()
		ws.Close()
	}
	for i := 0; i < 1000; i++ { // warm up allocator pools
		cycle()
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := rssPages(t)
	for i := 0; i < 10000; i++ {
		cycle()
	}
	runtime.GC()
	debug.FreeOSMemory()
	after := rssPages(t)
	growKB := (after - before) * int64(os.Getpagesize()) / 1024
	t.Logf("RSS %d -> %d pages (%+d KiB)", before, after, growKB)
	if growKB > 4096 {
		t.Fatalf("RSS grew by %d KiB over 10,000 cycles", growKB)
	}
}
