// dp-run: starts the N processes of a data-parallel job on this machine.
//
//   dp-run -n N [options] -- PROGRAM [ARGS...]
//
// Each process gets DP_RANK, DP_LOCAL_RANK, DP_WORLD_SIZE, DP_STORE and
// DP_RUN_ID (dp_model_parallelize reads them when num_shards is 0), its
// output lines prefixed with "[rank R] ". SIGINT, SIGTERM and SIGHUP are
// forwarded to every process. When one process fails (non-zero exit or a
// signal) the others get SIGTERM, then SIGKILL after a grace period, and
// dp-run exits non-zero after one summary line per rank. Several machines:
// run dp-run on each with --nodes M --node-rank K, the same --store (one
// every machine reaches: a shared directory or Redis) and the same --run-id.
// The processes are bound to their own CPUs when there are at least N (the
// CPUs dp-run may use, within its cgroup's quota, cut into N equal parts
// along the last-level caches, as dp cuts them between CPU replicas:
// core/cpu_plan.h), so that each one's dp sizes its threads to its part
// instead of every process using every core; each divides the quota by N
// (DP_LOCAL_WORLD_SIZE). --no-bind leaves placement to the kernel.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/cpu_budget.h"
#include "core/cpu_plan.h"
#include "core/cpu_topology.h"

namespace {

constexpr const char* kUsage =
    "usage: dp-run -n N [--store URL] [--run-id ID] [--timeout-ms MS] [--nodes M --node-rank K]\n"
    "              [--grace-ms MS] [--no-prefix] -- PROGRAM [ARGS...]\n"
    "  -n N            processes on this machine (ranks K*N .. K*N+N-1)\n"
    "  --store URL     where the processes meet: file:///shared/dir or redis://host:port[/prefix]\n"
    "                  (default: a fresh directory under $TMPDIR, removed at the end; one machine only)\n"
    "  --run-id ID     the job's id in the store (default: DP_RUN_ID, else a random one; machines must agree)\n"
    "  --timeout-ms MS bound of the rendezvous and of every collective (sets DP_TIMEOUT_MS)\n"
    "  --nodes M       machines of the job (default 1); --node-rank K: this one's index\n"
    "  --grace-ms MS   after a failure, how long the others have to stop on SIGTERM before SIGKILL (5000)\n"
    "  --no-prefix     do not prefix output lines with the rank\n"
    "  --no-bind       do not bind each process to its own slice of the CPUs\n";

int signal_pipe[2] = {-1, -1};  // handlers write the signal number; the loop reads it

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(signal_pipe[1], &b, 1);
  errno = saved;
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "dp-run: %s\n", message.c_str());
  std::exit(2);
}

long ParseNumber(const char* flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
    Die(std::string(flag) + " needs a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
        "], got '" + text + "'");
  return v;
}

std::string RandomId() {
  unsigned char bytes[8] = {};
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) Die("cannot read /dev/urandom");
  close(fd);
  std::string id = "run-";
  for (unsigned char b : bytes) {
    static const char* hex = "0123456789abcdef";
    id += hex[b >> 4];
    id += hex[b & 15];
  }
  return id;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;        // read ends of its stdout and stderr
  std::string out_buf, err_buf;  // partial lines
  bool running = false;
  int status = 0;                // from waitpid
  bool stopped_by_us = false;    // got SIGTERM/SIGKILL after another failed
};

// Writes the complete lines of `buf` to `fd` with the rank prefix; keeps the rest.
void FlushLines(std::string& buf, int fd, const std::string& prefix, bool all) {
  size_t start = 0;
  for (;;) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) {
      if (!all || start == buf.size()) break;
      nl = buf.size();
      buf += '\n';
    }
    std::string line = prefix + buf.substr(start, nl + 1 - start);
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t w = write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      p += w;
      left -= static_cast<size_t>(w);
    }
    start = nl + 1;
  }
  buf.erase(0, start);
}

std::string Describe(const Child& c) {
  if (c.running) return "still running";
  if (WIFEXITED(c.status)) {
    const int code = WEXITSTATUS(c.status);
    return code == 0 ? "exited 0" : "exited " + std::to_string(code);
  }
  if (WIFSIGNALED(c.status)) {
    const int sig = WTERMSIG(c.status);
    std::string s = std::string("killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (c.stopped_by_us) s += ", stopped by dp-run after another rank failed";
    return s;
  }
  return "ended";
}

bool Failed(const Child& c) { return !c.running && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0); }

}  // namespace

int main(int argc, char** argv) {
  long n = 0, nodes = 1, node_rank = 0, grace_ms = 5000, timeout_ms = 0;
  std::string store, run_id;
  bool prefix = true, bind = true;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) Die(std::string(flag) + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-n" || a == "--nproc") {
      n = ParseNumber("-n", value("-n"), 1, 4096);
    } else if (a == "--store") {
      store = value("--store");
    } else if (a == "--run-id") {
      run_id = value("--run-id");
    } else if (a == "--timeout-ms") {
      timeout_ms = ParseNumber("--timeout-ms", value("--timeout-ms"), 1, 86400000);
    } else if (a == "--nodes") {
      nodes = ParseNumber("--nodes", value("--nodes"), 1, 4096);
    } else if (a == "--node-rank") {
      node_rank = ParseNumber("--node-rank", value("--node-rank"), 0, 4095);
    } else if (a == "--grace-ms") {
      grace_ms = ParseNumber("--grace-ms", value("--grace-ms"), 0, 3600000);
    } else if (a == "--no-prefix") {
      prefix = false;
    } else if (a == "--no-bind") {
      bind = false;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      Die("unknown option '" + a + "'\n" + kUsage);
    }
  }
  if (n == 0) Die(std::string("-n N is required\n") + kUsage);
  if (i >= argc) Die(std::string("no program after --\n") + kUsage);
  if (node_rank >= nodes) Die("--node-rank " + std::to_string(node_rank) + " must be below --nodes " +
                              std::to_string(nodes));
  if (run_id.empty()) {
    const char* env = std::getenv("DP_RUN_ID");
    if (env != nullptr && *env != '\0') {
      run_id = env;
    } else if (nodes > 1) {
      Die("with --nodes > 1 every machine needs the same --run-id (or DP_RUN_ID)");
    } else {
      run_id = RandomId();
    }
  }
  std::string temp_dir;
  if (store.empty()) {
    if (nodes > 1) Die("with --nodes > 1 give a --store that every machine reaches");
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dp-run-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) Die("cannot create a store directory " + pattern + ": " + strerror(errno));
    temp_dir = buf.data();
    store = "file://" + temp_dir;
  }
  const long world = n * nodes;

  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) Die("pipe failed");
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Process `local` gets its part of the CPUs dp-run may use, divided as dp
  // divides them between CPU replicas (core/cpu_plan.h): equal parts, each
  // inside one last-level cache where it fits, within the cgroup's quota;
  // with fewer CPUs than processes nobody is bound.
  dp::CpuPlan plan;
  if (bind) plan = dp::DivideCpus(dp::ProcessCpuTopology(), dp::UsableCpus(), static_cast<int>(n));

  std::vector<Child> children(static_cast<size_t>(n));
  for (long local = 0; local < n; ++local) {
    Child& c = children[static_cast<size_t>(local)];
    c.rank = static_cast<int>(node_rank * n + local);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) Die("pipe failed");
    const pid_t pid = fork();
    if (pid < 0) Die(std::string("fork failed: ") + strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);  // its own group: dp-run decides what reaches it
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
      if (plan.pinned && !dp::SetThreadAffinity(plan.parts[static_cast<size_t>(local)].cpus))
        std::fprintf(stderr, "dp-run: cannot bind rank %d to its CPUs: %s\n", c.rank, strerror(errno));
      setenv("DP_RANK", std::to_string(c.rank).c_str(), 1);
      setenv("DP_LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("DP_WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("DP_LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("DP_STORE", store.c_str(), 1);
      setenv("DP_RUN_ID", run_id.c_str(), 1);
      if (timeout_ms > 0) setenv("DP_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
      execvp(argv[i], argv + i);
      std::fprintf(stderr, "dp-run: cannot start %s: %s\n", argv[i], strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);  // also here: no race with an early signal
    close(out[1]);
    close(err[1]);
    c.pid = pid;
    c.out = out[0];
    c.err = err[0];
    c.running = true;
  }

  using Clock = std::chrono::steady_clock;
  bool stopping = false;
  Clock::time_point kill_at{};
  int first_failed = -1;
  auto stop_others = [&]() {
    if (stopping) return;
    stopping = true;
    kill_at = Clock::now() + std::chrono::milliseconds(grace_ms);
    for (Child& c : children)
      if (c.running) {
        c.stopped_by_us = true;
        kill(-c.pid, SIGTERM);
      }
  };

  for (;;) {
    bool any_running = false, any_open = false;
    for (const Child& c : children) {
      any_running = any_running || c.running;
      any_open = any_open || c.out >= 0 || c.err >= 0;
    }
    if (!any_running && !any_open) break;
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owner;  // child, is stderr
    fds.push_back({signal_pipe[0], POLLIN, 0});
    owner.push_back({0, false});
    for (size_t k = 0; k < children.size(); ++k) {
      if (children[k].out >= 0) {
        fds.push_back({children[k].out, POLLIN, 0});
        owner.push_back({k, false});
      }
      if (children[k].err >= 0) {
        fds.push_back({children[k].err, POLLIN, 0});
        owner.push_back({k, true});
      }
    }
    int wait_ms = 1000;
    if (stopping && any_running) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()).count();
      wait_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(left, 1000)));
    }
    const int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno != EINTR) Die(std::string("poll failed: ") + strerror(errno));
    if (stopping && any_running && Clock::now() >= kill_at)
      for (Child& c : children)
        if (c.running) kill(-c.pid, SIGKILL);
    for (size_t f = 1; ready > 0 && f < fds.size(); ++f) {
      if (fds[f].revents == 0) continue;
      Child& c = children[owner[f].first];
      const bool is_err = owner[f].second;
      char buf[65536];
      const ssize_t got = read(fds[f].fd, buf, sizeof buf);
      std::string& pending = is_err ? c.err_buf : c.out_buf;
      const std::string pre = prefix ? "[rank " + std::to_string(c.rank) + "] " : "";
      if (got > 0) {
        pending.append(buf, static_cast<size_t>(got));
        FlushLines(pending, is_err ? 2 : 1, pre, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        FlushLines(pending, is_err ? 2 : 1, pre, true);
        close(fds[f].fd);
        (is_err ? c.err : c.out) = -1;
      }
    }
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) {
      unsigned char sigs[64];
      const ssize_t got = read(signal_pipe[0], sigs, sizeof sigs);
      for (ssize_t k = 0; k < got; ++k) {
        const int sig = sigs[k];
        if (sig == SIGCHLD) continue;  // reaped below
        for (Child& c : children)
          if (c.running) kill(-c.pid, sig);
      }
    }
    // Reap whoever ended (SIGCHLD may coalesce: look at every child).
    for (size_t k = 0; k < children.size(); ++k) {
      Child& c = children[k];
      if (!c.running) continue;
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r != c.pid) continue;
      c.running = false;
      c.status = st;
      if (Failed(c) && !c.stopped_by_us) {
        if (first_failed < 0) first_failed = static_cast<int>(k);
        stop_others();
      }
    }
  }

  int code = 0;
  if (first_failed >= 0) {
    const Child& f = children[static_cast<size_t>(first_failed)];
    code = WIFEXITED(f.status) ? WEXITSTATUS(f.status) : 128 + WTERMSIG(f.status);
    std::fprintf(stderr, "dp-run: rank %d failed; %ld processes:\n", f.rank, n);
    for (const Child& c : children) std::fprintf(stderr, "dp-run:   rank %d: %s\n", c.rank, Describe(c).c_str());
  }
  if (!temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
  return code;
}
