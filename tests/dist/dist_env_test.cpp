// DistEnv: the torchrun, Slurm and MPI environments, and the errors for bad values.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/dist_error.h"

namespace hwt {
namespace {

TEST(DistEnv, NoVariablesIsASingleProcess) {
  DistEnv env = parse_dist_env({{"PATH", "/usr/bin"}});
  EXPECT_EQ(env.source, "single");
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
}

TEST(DistEnv, Torchrun) {
  DistEnv env = parse_dist_env({{"RANK", "3"},
                                {"WORLD_SIZE", "4"},
                                {"LOCAL_RANK", "1"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "10.1.2.3"},
                                {"MASTER_PORT", "29612"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.node_rank(), 1);
  EXPECT_EQ(env.master_addr, "10.1.2.3");
  EXPECT_EQ(env.master_port, 29612);
}

TEST(DistEnv, TorchrunDefaultsToOneNodeOnLoopback) {
  DistEnv env = parse_dist_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
}

TEST(DistEnv, SeveralNodesNeedMasterAddr) {
  try {
    parse_dist_env({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
}

TEST(DistEnv, Slurm) {
  DistEnv env = parse_dist_env({{"SLURM_PROCID", "5"},
                                {"SLURM_NTASKS", "8"},
                                {"SLURM_LOCALID", "1"},
                                {"SLURM_NTASKS_PER_NODE", "4"},
                                {"SLURM_NODELIST", "gpu[07-10],login2"},
                                {"MASTER_PORT", "30000"}});
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "gpu07");
  EXPECT_EQ(env.master_port, 30000);
}

// A step of 2 tasks, one per node, in a job of 8 at 4 per node: the step's counts.
TEST(DistEnv, SlurmStepCountsWinOverTheJobs) {
  DistEnv env = parse_dist_env({{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "8"},
                                {"SLURM_STEP_NUM_TASKS", "2"},
                                {"SLURM_NTASKS_PER_NODE", "4"},
                                {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                                {"SLURM_LOCALID", "0"},
                                {"SLURM_NODELIST", "n[1-2]"}});
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_world_size, 1);
}

TEST(DistEnv, SlurmPortFromJobIdAndTasksPerNodeFormat) {
  DistEnv env = parse_dist_env({{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "6"},
                                {"SLURM_LOCALID", "0"},
                                {"SLURM_TASKS_PER_NODE", "3(x2)"},
                                {"SLURM_JOB_ID", "123456"},
                                {"SLURM_NODELIST", "n1"}});
  EXPECT_EQ(env.local_world_size, 3);
  EXPECT_EQ(env.master_port, 29500 + 456);
  EXPECT_EQ(env.master_addr, "n1");
}

TEST(DistEnv, TorchrunVariablesWinOverSlurm) {
  DistEnv env = parse_dist_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 1);
}

TEST(DistEnv, OpenMpi) {
  DistEnv env = parse_dist_env({{"OMPI_COMM_WORLD_RANK", "2"},
                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                {"MASTER_ADDR", "host0"}});
  EXPECT_EQ(env.source, "mpi");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "host0");
}

// mpirun inside a Slurm allocation: every rank inherits the batch step's SLURM_PROCID = 0, and the
// launcher's own variables say which rank each is; rank 0's host is the allocation's first node.
TEST(DistEnv, MpirunInsideASlurmAllocationReadsMpisVariables) {
  const std::map<std::string, std::string> batch_step = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"}};
  auto with = [&](std::map<std::string, std::string> more) {
    more.insert(batch_step.begin(), batch_step.end());
    return parse_dist_env(more);
  };
  const DistEnv ompi = with({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(ompi.source, "mpi");
  EXPECT_EQ(ompi.rank, 5);
  EXPECT_EQ(ompi.local_rank, 1);
  EXPECT_EQ(ompi.master_addr, "gpu07");
  const DistEnv hydra = with({{"PMI_RANK", "3"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "3"}, {"MPI_LOCALNRANKS", "4"}});
  EXPECT_EQ(hydra.source, "mpi");
  EXPECT_EQ(hydra.rank, 3);
  // All ranks on this node (mpirun pinned to one node of the allocation): rank 0 is here.
  const DistEnv one_node = with({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(one_node.master_addr, "127.0.0.1");
  // srun --mpi=pmi2 sets PMI_RANK as well: the launch is srun's, read from Slurm's variables.
  std::map<std::string, std::string> srun = {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"},
                                             {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODELIST", "gpu[07-08]"},
                                             {"PMI_RANK", "6"}, {"PMI_SIZE", "8"}};
  const DistEnv pmi2 = parse_dist_env(srun);
  EXPECT_EQ(pmi2.source, "slurm");
  EXPECT_EQ(pmi2.rank, 6);
  EXPECT_EQ(pmi2.local_rank, 2);
}

TEST(DistEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node01"), "node01");
  EXPECT_EQ(first_slurm_host("node[01-04]"), "node01");
  EXPECT_EQ(first_slurm_host("node[3,5-7],other"), "node3");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("rack[2-3]-n[09-12]"), "rack2-n09");
  EXPECT_THROW(first_slurm_host("node[01-04"), ConfigError);
}

void expect_error_naming(const std::map<std::string, std::string>& vars, const std::string& name) {
  try {
    parse_dist_env(vars);
    ADD_FAILURE() << "expected a ConfigError naming " << name;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(DistEnv, BadValuesNameTheVariable) {
  expect_error_naming({{"RANK", "abc"}, {"WORLD_SIZE", "2"}}, "RANK='abc'");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}, "WORLD_SIZE='2x'");
  expect_error_naming({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0");
  expect_error_naming({{"RANK", "0"}}, "WORLD_SIZE");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-1"}}, "LOCAL_RANK=-1");
  expect_error_naming({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}}, "SLURM_PROCID='x'");
  expect_error_naming({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODELIST", "n1"}}, "SLURM_PROCID=4");
}

// A rendezvous host that does not resolve fails at once, naming MASTER_ADDR (".invalid" never
// resolves: RFC 2606), instead of waiting out the store's timeout in silence.
TEST(DistEnv, AMasterAddressThatDoesNotResolveIsNamed) {
  DistEnv env;
  env.master_addr = "nosuch.invalid";
  try {
    check_master_address(env);
    FAIL() << "no error";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR = 'nosuch.invalid' does not resolve"), std::string::npos)
        << e.what();
  }
  env.master_addr = "127.0.0.1";
  EXPECT_NO_THROW(check_master_address(env));
  env.master_addr = "localhost";
  EXPECT_NO_THROW(check_master_address(env));
}

}  // namespace
}  // namespace hwt
