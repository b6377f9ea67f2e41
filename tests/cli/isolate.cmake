# Keeps a test's `concord` runs from reading the user's config file or CONCORD_* variables
# (docs/running.md, "Configuration"): an empty config folder under WORK, every field's variable unset.
file(MAKE_DIRECTORY ${WORK}/xdg-config)
set(ENV{XDG_CONFIG_HOME} ${WORK}/xdg-config)
foreach(v CONCORD_STORE CONCORD_CACHE_DIR CONCORD_BACKEND CONCORD_DEVICE CONCORD_TIME_LIMIT_S CONCORD_LOG_LEVEL
          CONCORD_CUDA_SWEEP_PAUSE_US CONCORD_PYTHON)
  unset(ENV{${v}})
endforeach()
