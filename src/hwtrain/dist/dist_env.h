// DistEnv: who this process is in a distributed run, read from the environment the launcher left:
// torchrun and `hwtrain launch` (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, first host of
// SLURM_NODELIST) or Open MPI / MPICH's mpirun (OMPI_COMM_WORLD_*, PMI_*). Without any of them
// the run is a single process. Invalid values are ConfigErrors naming the variable.
#pragma once
#include <map>
#include <string>

namespace hwt {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // torchrun's default
  std::string source = "single";  // single | torchrun | slurm | mpi

  bool distributed() const { return world_size > 1; }
  int node_rank() const { return rank / local_world_size; }  // assumes equal ranks per node
  std::string describe() const;  // "rank 1/4 (local 1/2) via torchrun, master 10.0.0.1:29500"
};

// Reads the process environment.
DistEnv read_dist_env();
// The same from an explicit variable map (tests, and the launcher's own checks).
DistEnv parse_dist_env(const std::map<std::string, std::string>& vars);

// Throws DistError naming MASTER_ADDR when the rendezvous host certainly does not exist (a typo otherwise
// waits out the store's timeout in silence, connection attempt after attempt).
void check_master_address(const DistEnv& env);

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace hwt
