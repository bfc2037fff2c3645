#include "hwtrain/dist/dist_env.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdlib>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/dist_error.h"

extern char** environ;

namespace hwt {

namespace {

using Vars = std::map<std::string, std::string>;

const std::string* find(const Vars& vars, const std::string& name) {
  auto it = vars.find(name);
  return it == vars.end() || it->second.empty() ? nullptr : &it->second;
}

int parse_int(const Vars& vars, const std::string& name, const std::string& what) {
  const std::string* s = find(vars, name);
  if (!s) throw ConfigError("environment variable " + name + " is missing; it should hold " + what);
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(*s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s->size() || v < -1000000000L || v > 1000000000L) {
    throw ConfigError("environment variable " + name + "='" + *s + "' is not an integer; it should hold " + what);
  }
  return static_cast<int>(v);
}

int parse_int_or(const Vars& vars, const std::string& name, const std::string& what, int fallback) {
  return find(vars, name) ? parse_int(vars, name, what) : fallback;
}

// "2(x3),1" (Slurm's tasks-per-node format) -> 2.
int leading_int(const std::string& s, int fallback) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  return i == 0 ? fallback : std::atoi(s.substr(0, i).c_str());
}

void validate(const DistEnv& env, const std::string& rank_var, const std::string& world_var,
              const std::string& local_rank_var, const std::string& port_var) {
  if (env.world_size < 1) {
    throw ConfigError("environment variable " + world_var + "=" + std::to_string(env.world_size) +
                      " must be at least 1 (the number of processes in the run)");
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw ConfigError("environment variable " + rank_var + "=" + std::to_string(env.rank) + " must be in [0, " +
                      std::to_string(env.world_size - 1) + "] (" + world_var + "=" +
                      std::to_string(env.world_size) + ")");
  }
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    throw ConfigError("the local world size " + std::to_string(env.local_world_size) + " must be in [1, " +
                      std::to_string(env.world_size) + "] (" + world_var + "=" + std::to_string(env.world_size) +
                      ")");
  }
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    throw ConfigError("environment variable " + local_rank_var + "=" + std::to_string(env.local_rank) +
                      " must be in [0, " + std::to_string(env.local_world_size - 1) +
                      "] (the processes on this node)");
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    throw ConfigError("environment variable " + port_var + "=" + std::to_string(env.master_port) +
                      " must be a TCP port in [1, 65535]");
  }
}

// The master address when the launcher may not have set one: loopback is right only when every
// rank runs on this node.
std::string master_addr_or_default(const Vars& vars, const DistEnv& env, const std::string& hint) {
  if (const std::string* a = find(vars, "MASTER_ADDR")) return *a;
  if (env.local_world_size < env.world_size) {
    throw ConfigError("environment variable MASTER_ADDR is missing and the ranks span several nodes (" +
                      std::to_string(env.world_size) + " ranks, " + std::to_string(env.local_world_size) +
                      " on this node); " + hint);
  }
  return "127.0.0.1";
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first top-level item: commas inside brackets do not separate hosts.
  std::string item;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    item += c;
  }
  // Each bracket group contributes its first value: "node[01-04,07]" -> "node01".
  std::string host;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] != '[') {
      host += item[i];
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string::npos) throw ConfigError("SLURM_NODELIST='" + nodelist + "' has an unclosed '['");
    std::string group = item.substr(i + 1, close - i - 1);
    host += group.substr(0, group.find_first_of(",-"));
    i = close;
  }
  if (host.empty()) throw ConfigError("SLURM_NODELIST='" + nodelist + "' names no host");
  return host;
}

std::string DistEnv::describe() const {
  if (!distributed()) return "single process";
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (local " + std::to_string(local_rank) +
         "/" + std::to_string(local_world_size) + ") via " + source + ", master " + master_addr + ":" +
         std::to_string(master_port);
}

namespace {

// srun's variables (a step's tasks).
DistEnv parse_slurm_env(const Vars& vars, const std::string& port_what) {
  DistEnv env;
  env.source = "slurm";
  env.rank = parse_int(vars, "SLURM_PROCID", "this task's rank");
  // srun sets the step's task count; SLURM_NTASKS is the job's, which a step may not use fully.
  const std::string world_var = find(vars, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  env.world_size = parse_int(vars, world_var, "the number of tasks");
  env.local_rank = parse_int_or(vars, "SLURM_LOCALID", "this task's rank on its node", 0);
  // The step's tasks per node first, as for the world size: the job's may be more.
  if (const std::string* t = find(vars, "SLURM_STEP_TASKS_PER_NODE")) {
    env.local_world_size = leading_int(*t, 1);
  } else if (find(vars, "SLURM_NTASKS_PER_NODE")) {
    env.local_world_size = leading_int(*find(vars, "SLURM_NTASKS_PER_NODE"), 1);
  } else if (const std::string* t2 = find(vars, "SLURM_TASKS_PER_NODE")) {
    env.local_world_size = leading_int(*t2, 1);
  } else {
    env.local_world_size = env.local_rank + 1;
  }
  env.local_world_size = std::max(std::min(env.local_world_size, env.world_size), env.local_rank + 1);
  // Jobs sharing a node must not share the default port: derive it from the job id.
  int default_port = env.master_port;
  if (find(vars, "SLURM_JOB_ID")) {
    default_port += parse_int(vars, "SLURM_JOB_ID", "the Slurm job id") % 1000;
  }
  env.master_port = parse_int_or(vars, "MASTER_PORT", port_what, default_port);
  validate(env, "SLURM_PROCID", world_var, "SLURM_LOCALID", "MASTER_PORT");
  if (const std::string* a = find(vars, "MASTER_ADDR")) {
    env.master_addr = *a;
  } else {
    const std::string* list = find(vars, "SLURM_STEP_NODELIST");
    if (!list) list = find(vars, "SLURM_NODELIST");
    if (!list) list = find(vars, "SLURM_JOB_NODELIST");
    if (!list) throw ConfigError("SLURM_NODELIST is missing: set MASTER_ADDR to the first node of the job");
    env.master_addr = first_slurm_host(*list);
  }
  return env;
}

// Open MPI's or MPICH / Intel MPI's variables (mpirun, mpiexec; srun --mpi=pmi2 sets PMI_RANK too).
DistEnv parse_mpi_env(const Vars& vars, bool ompi, const std::string& port_what) {
  DistEnv env;
  env.source = "mpi";
  const std::string p = ompi ? "OMPI_COMM_WORLD_" : "PMI_";
  env.rank = parse_int(vars, p + "RANK", "this process's rank");
  env.world_size = parse_int(vars, p + "SIZE", "the number of processes");
  const std::string local_rank_var = ompi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID";
  env.local_rank = parse_int_or(vars, local_rank_var, "this process's rank on its node", 0);
  env.local_world_size = parse_int_or(vars, ompi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS",
                                      "the number of processes on this node", env.world_size);
  env.master_port = parse_int_or(vars, "MASTER_PORT", port_what, env.master_port);
  validate(env, p + "RANK", p + "SIZE", local_rank_var, "MASTER_PORT");
  const std::string* slurm_nodes = find(vars, "SLURM_JOB_NODELIST");  // mpirun inside an allocation
  if (!slurm_nodes) slurm_nodes = find(vars, "SLURM_NODELIST");
  if (!find(vars, "MASTER_ADDR") && slurm_nodes != nullptr && env.local_world_size < env.world_size) {
    env.master_addr = first_slurm_host(*slurm_nodes);  // across nodes, mpirun places rank 0 on the first
  } else {
    env.master_addr =
        master_addr_or_default(vars, env, "pass it to every rank (mpirun -x MASTER_ADDR=<rank 0's host>)");
  }
  return env;
}

}  // namespace

DistEnv parse_dist_env(const Vars& vars) {
  DistEnv env;
  const std::string port_what = "the rendezvous TCP port of rank 0";
  if (find(vars, "RANK") || find(vars, "WORLD_SIZE")) {  // torchrun, hwtrain launch
    env.source = "torchrun";
    env.rank = parse_int(vars, "RANK", "this process's rank (0..WORLD_SIZE-1)");
    env.world_size = parse_int(vars, "WORLD_SIZE", "the number of processes in the run");
    // Without the local variables, assume one node.
    env.local_world_size =
        parse_int_or(vars, "LOCAL_WORLD_SIZE", "the number of processes on this node", env.world_size);
    env.local_rank = parse_int_or(vars, "LOCAL_RANK", "this process's rank on its node",
                                  env.local_world_size > 0 ? env.rank % env.local_world_size : 0);
    env.master_port = parse_int_or(vars, "MASTER_PORT", port_what, env.master_port);
    validate(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT");
    env.master_addr = master_addr_or_default(vars, env, "set it to the address of rank 0's node");
    return env;
  }
  // An MPI launcher's variables before Slurm's: mpirun inside an allocation hands each rank its own,
  // while the batch step's SLURM_PROCID = 0 is inherited by all of them. srun --mpi=pmi2 sets
  // PMI_RANK too (without Hydra's MPI_LOCALRANKID): that launch is Slurm's, read from its variables.
  const bool ompi = find(vars, "OMPI_COMM_WORLD_RANK") != nullptr;
  const bool slurm = find(vars, "SLURM_PROCID") && find(vars, "SLURM_NTASKS");
  const bool pmi = find(vars, "PMI_RANK") && (find(vars, "MPI_LOCALRANKID") || !slurm);
  if (ompi || pmi) return parse_mpi_env(vars, ompi, port_what);
  if (slurm) return parse_slurm_env(vars, port_what);
  return env;
}

DistEnv read_dist_env() {
  Vars vars;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return parse_dist_env(vars);
}

void check_master_address(const DistEnv& env) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  // Only a name that certainly does not exist fails now; a resolver that is busy or failing for
  // the moment (EAI_AGAIN, EAI_SYSTEM, many ranks asking at a job's start) is left to the store's
  // connection retries within dist.timeout.
  const bool unknown = rc == EAI_NONAME || rc == EAI_FAIL
#ifdef EAI_NODATA
                       || rc == EAI_NODATA
#endif
      ;
  if (unknown) {
    throw DistError("MASTER_ADDR = '" + env.master_addr + "' does not resolve (" + ::gai_strerror(rc) +
                    "): set it (or hwtrain launch --master-addr) to rank 0's host name or IP address");
  }
}

}  // namespace hwt
