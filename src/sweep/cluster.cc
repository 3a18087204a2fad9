#include "nest/sweep/cluster.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "nest/core/error.h"
#include "sweep/engine.h"

#ifdef NEST_WITH_MPI
#include <boost/mpi/collectives/broadcast.hpp>
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#endif

namespace nest::sweep {

struct Cluster::Impl {
#ifdef NEST_WITH_MPI
  std::optional<boost::mpi::environment> environment;
  std::optional<boost::mpi::communicator> world;
#endif
  int rank = 0;
  int size = 1;
  bool mpi = false;
};

namespace {

// The number of ranks an MPI launcher started, or 0 when this process was not started by one.
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  }
  return std::getenv("PMIX_RANK") != nullptr ? 1 : 0;
}

}  // namespace

Cluster::Cluster() : impl_(std::make_unique<Impl>()) {
  const int ranks = launched_ranks();
  if (ranks == 0) return;
#ifdef NEST_WITH_MPI
  // Only the main thread calls MPI; evaluation threads never do.
  impl_->environment.emplace(boost::mpi::threading::funneled, /*abort_on_exception=*/false);
  impl_->world.emplace();
  impl_->rank = impl_->world->rank();
  impl_->size = impl_->world->size();
  impl_->mpi = true;
#else
  if (ranks > 1) {
    throw Error::input(
        "started as " + std::to_string(ranks) + " MPI ranks, but this nest was built without MPI",
        {.expected = "a build configured with -DNEST_WITH_MPI=ON, or a single process"});
  }
#endif
}

Cluster::~Cluster() = default;

int Cluster::rank() const noexcept { return impl_->rank; }
int Cluster::size() const noexcept { return impl_->size; }
bool Cluster::mpi() const noexcept { return impl_->mpi; }

bool Cluster::mpi_built() noexcept {
#ifdef NEST_WITH_MPI
  return true;
#else
  return false;
#endif
}

namespace detail {

#ifdef NEST_WITH_MPI
namespace {

// worker -> rank 0: (point, CSV line) of a finished point, or (-1, "") for a free slot at the
// start; every such message asks for one more point.
constexpr int kTagResult = 1;
// rank 0 -> worker: the next point for the slot that asked, or -1: the slot is closed.
constexpr int kTagAssign = 2;

using Message = std::pair<long long, std::string>;

constexpr auto kIdleWait = std::chrono::milliseconds(2);

std::vector<std::size_t> run_rank0(boost::mpi::communicator& world, Dispatcher& dispatcher,
                                   Sink& sink, const std::function<std::string(std::size_t)>& work,
                                   int threads) {
  const long long remote_slots = static_cast<long long>(world.size() - 1) * threads;
  long long closed = 0;
  auto answer = [&](int rank) {
    if (auto point = dispatcher.next()) {
      world.send(rank, kTagAssign, static_cast<long long>(*point));
    } else {
      world.send(rank, kTagAssign, -1LL);
      ++closed;
    }
  };
  std::vector<std::size_t> evaluated(static_cast<std::size_t>(world.size()), 0);
  WorkerPool pool(threads, work);
  try {
    for (int t = 0; t < threads; ++t) {
      if (auto point = dispatcher.next()) pool.submit(*point);
    }
    while (closed < remote_slots || pool.in_flight() > 0) {
      bool idle = true;
      while (auto status = world.iprobe(boost::mpi::any_source, kTagResult)) {
        Message m;
        world.recv(status->source(), kTagResult, m);
        if (m.first >= 0) {
          sink.accept({static_cast<std::size_t>(m.first), std::move(m.second)});
          ++evaluated[static_cast<std::size_t>(status->source())];
        }
        answer(status->source());
        idle = false;
      }
      if (auto finished = pool.wait(idle ? kIdleWait : std::chrono::milliseconds(0))) {
        sink.accept(*finished);
        ++evaluated[0];
        if (auto point = dispatcher.next()) pool.submit(*point);
      }
    }
  } catch (...) {
    // Close every remote slot (each finishes the point it runs, if any) so that no rank waits
    // forever, then let the error through.
    while (closed < remote_slots) {
      Message m;
      const auto status = world.recv(boost::mpi::any_source, kTagResult, m);
      world.send(status.source(), kTagAssign, -1LL);
      ++closed;
    }
    throw;
  }
  return evaluated;
}

std::size_t run_worker(boost::mpi::communicator& world,
                       const std::function<std::string(std::size_t)>& work, int threads) {
  WorkerPool pool(threads, work);
  for (int t = 0; t < threads; ++t) world.send(0, kTagResult, Message{-1, {}});
  int open = threads;
  std::size_t evaluated = 0;
  while (open > 0) {
    bool idle = true;
    while (auto status = world.iprobe(0, kTagAssign)) {
      long long point = 0;
      world.recv(0, kTagAssign, point);
      if (point < 0) {
        --open;
      } else {
        pool.submit(static_cast<std::size_t>(point));
      }
      idle = false;
    }
    if (auto finished = pool.wait(idle ? kIdleWait : std::chrono::milliseconds(0))) {
      world.send(0, kTagResult, Message{static_cast<long long>(finished->point), finished->line});
      ++evaluated;
    }
  }
  return evaluated;
}

}  // namespace

std::string agree(const Cluster* cluster, const std::string& error) {
  if (cluster == nullptr || !cluster->mpi()) return error;
  std::string shared = error;
  boost::mpi::broadcast(*cluster->impl()->world, shared, 0);
  return shared;
}

std::vector<std::size_t> run_distributed(const Cluster& cluster, Dispatcher* dispatcher, Sink* sink,
                                         const std::function<std::string(std::size_t)>& work,
                                         int threads) {
  boost::mpi::communicator& world = *cluster.impl()->world;
  if (world.rank() == 0) return run_rank0(world, *dispatcher, *sink, work, threads);
  return {run_worker(world, work, threads)};
}

#else

std::string agree(const Cluster* /*cluster*/, const std::string& error) { return error; }

std::vector<std::size_t> run_distributed(const Cluster& /*cluster*/, Dispatcher* /*dispatcher*/,
                                         Sink* /*sink*/,
                                         const std::function<std::string(std::size_t)>& /*work*/,
                                         int /*threads*/) {
  throw Error::internal("run_distributed without MPI support");
}

#endif

}  // namespace detail
}  // namespace nest::sweep
