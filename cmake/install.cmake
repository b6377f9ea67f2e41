# What `cmake --install` puts where, and the Debian package CPack makes of it (docs/running.md,
# "Installing").
#   runtime     bin/concord, bin/concordd and its systemd unit (lib/systemd/system), lib/libconcord_intercept.so
#               (the LD_PRELOAD library, when CUDA was found), share/concord/plot.py (`concord plot`),
#               share/concord/examples/, share/doc/concord/ (README.md and docs/): the package "concord"
#   dev         the static libraries (lib/) and the public headers (include/concord/): "concord-dev"
#   gpu_bundle  not installed by default: the GPU machine's bundle (scripts/gpu_build.sh): the CLI,
#               the GPU tests and benches in bin/, and the Debian shared libraries they use that a
#               plain CUDA image lacks in lib/
include(GNUInstallDirs)

install(TARGETS concord_cli concordd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# The node daemon's systemd unit (not enabled by the package: `systemctl enable --now concordd`).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/concordd.service DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/src/cli/plot.py DESTINATION ${CMAKE_INSTALL_DATADIR}/concord COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/concord/examples
        COMPONENT runtime FILES_MATCHING PATTERN "*.yaml")
# The interception library in lib/, on the loader's default path: LD_PRELOAD=libconcord_intercept.so.
if(TARGET concord_intercept)
  install(TARGETS concord_intercept LIBRARY DESTINATION lib COMPONENT runtime)
  set(concord_package_intercept
      "It includes libconcord_intercept.so, the LD_PRELOAD library that makes an unmodified CUDA process a tenant of concordd (built with CUDA ${CUDAToolkit_VERSION}).")
else()
  set(concord_package_intercept
      "This build found no CUDA toolkit: it has no interception library (libconcord_intercept.so) and no CUDA backend; build it where nvcc is present for those.")
endif()
# The Slurm plugin (built where libslurm-dev is) in Slurm's plugin folder, and its plugstack.conf
# line, commented out, in the folder Debian's plugstack.conf includes (docs/cluster.md).
if(TARGET concord_spank)
  install(TARGETS concord_spank LIBRARY DESTINATION lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm COMPONENT runtime)
  # /etc is the package's alone: a plain `cmake --install --prefix DIR` leaves it out.
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/slurm/concord.conf DESTINATION /etc/slurm/plugstack.conf.d COMPONENT runtime
          EXCLUDE_FROM_ALL)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/slurm/slurmd-concord.conf DESTINATION lib/systemd/system/slurmd.service.d
          RENAME concord.conf COMPONENT runtime)
  string(APPEND concord_package_intercept
         " It includes concord_spank.so, the Slurm plugin that makes a job a tenant (sbatch --concord-class=lc|be).")
endif()

set(concord_libraries concord_core concord_suite concord_frontend concord_mechanism concord_policies concord_sim
    concord_backends concord_profile concord_runner)
if(TARGET concord_cuda)
  list(APPEND concord_libraries concord_cuda)
endif()
install(TARGETS ${concord_libraries} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/concord DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT runtime)

# The GPU bundle: the binaries gpu_run.sh runs and the Debian libraries they link (yaml-cpp, fmt,
# spdlog, Google Benchmark, cpp-httplib and its brotli), resolved from the binaries themselves at
# install time.
set(bundle_targets concord_cli concordd)
foreach(t concord_gpu_tests concord_gpu_bench concord_intercept_app concord_intercept_bench concord_raise_bench concord_fedcm_bench concord_lsbe_bench concord_aker_bench concord_pbs_bench
          concord_channel_probe concord_channel_analyze)
  if(TARGET ${t})
    list(APPEND bundle_targets ${t})
  endif()
endforeach()
install(TARGETS ${bundle_targets} RUNTIME_DEPENDENCY_SET concord_bundle_libraries
        RUNTIME DESTINATION bin COMPONENT gpu_bundle EXCLUDE_FROM_ALL)
# The interception library beside the Debian libraries (the GPU tests and bench/intercept find it
# in lib/).
if(TARGET concord_intercept)
  install(TARGETS concord_intercept LIBRARY DESTINATION lib COMPONENT gpu_bundle EXCLUDE_FROM_ALL)
endif()
install(RUNTIME_DEPENDENCY_SET concord_bundle_libraries
        PRE_INCLUDE_REGEXES "yaml-cpp" "libfmt" "libspdlog" "libbenchmark" "libcpp-httplib" "libbrotli"
        PRE_EXCLUDE_REGEXES ".*"
        LIBRARY DESTINATION lib COMPONENT gpu_bundle EXCLUDE_FROM_ALL)

# The Debian packages (the synopsis is the package summary; the description's text follows it):
# "concord" (runtime: what a node runs) and "concord-dev" (dev: static
# libraries and headers, for programs built on the engine), installed under /usr. The runtime's
# Depends comes from its binaries' shared libraries (dpkg-shlibdeps); `concord plot` needs Python 3
# and matplotlib, recommended rather than required (the rest runs without them).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME concord)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel-level GPU co-location runtime for NVIDIA GPUs")
set(CPACK_PACKAGE_CONTACT "Concord developers <concord@invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME concord)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "Concord shares one GPU among tenants kernel by kernel: it chooses each kernel's SMs, resident blocks per SM, cache policy, fusion, split, order and preemption. The package holds the concord command, the node daemon concordd and its systemd unit, examples and documentation. ${concord_package_intercept}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "python3, python3-matplotlib")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "nvidia-driver")
# postinst: the "concord" group of concordd's control socket and the "concord-lc" group of its LC tenants.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/postinst)
# The plugin's plugstack.conf line is the admin's to edit: a conffile, kept across upgrades.
if(TARGET concord_spank)
  file(WRITE ${CMAKE_BINARY_DIR}/debian/conffiles "/etc/slurm/plugstack.conf.d/concord.conf\n")
  list(APPEND CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/debian/conffiles)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME concord-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "concord (= ${PROJECT_VERSION}), libyaml-cpp-dev, libfmt-dev, libspdlog-dev, libsqlite3-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Concord's static libraries and public headers: the engine, the policies, the simulator and the backends as static libraries, with the public headers under /usr/include/concord, for programs that build on Concord's runtime.")
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/package)
include(CPack)
