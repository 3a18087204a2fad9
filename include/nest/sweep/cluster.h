#pragma once
/// \file
/// The processes a sweep runs on: this process alone, or the ranks of an MPI job (Boost.MPI over
/// OpenMPI) when NEST was built with `-DNEST_WITH_MPI=ON` and started by `mpirun`. MPI stays
/// behind this header (pimpl), so including it needs no MPI headers.

#include <memory>

namespace nest::sweep {

/// Joins the MPI job if there is one; owns MPI's initialization and finalization. Create at
/// most one per process, before any threads, and keep it alive while sweeps run.
class Cluster {
 public:
  /// Joins the MPI job when the process was started by an MPI launcher (OpenMPI's
  /// OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_RANK) and NEST was built with MPI; otherwise a
  /// single-process cluster. Throws `Error` (input) when a launcher started several ranks of a
  /// NEST built without MPI (each would write the same files).
  Cluster();
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// This process's rank, 0 .. size()-1.
  [[nodiscard]] int rank() const noexcept;
  /// Number of processes.
  [[nodiscard]] int size() const noexcept;
  /// True when MPI was initialized (even with one rank).
  [[nodiscard]] bool mpi() const noexcept;
  /// True when NEST was built with MPI support.
  [[nodiscard]] static bool mpi_built() noexcept;

  /// MPI's objects when there is a job (defined in src/sweep/cluster.cc).
  struct Impl;
  /// The implementation (for the sweep runner; opaque elsewhere).
  [[nodiscard]] Impl* impl() const noexcept { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::sweep
