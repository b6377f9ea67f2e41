# The config file, the environment and flags: each overrides the one before it, and a bad value
# is an error (exit 2) naming the file and line or the variable, the field and the reason.
# Inputs: CONCORD, EXAMPLES, WORK.
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/isolate.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../expect.cmake)
set(config_dir ${WORK}/xdg-config/concord)
file(MAKE_DIRECTORY ${config_dir})
set(spec ${EXAMPLES}/pair.yaml)


# The device of a run's results file.
function(device_of json out)
  file(READ ${json} text)
  string(JSON name GET "${text}" device_info name)
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

# Built in: the simulated H200.
expect_ok(${CONCORD} run ${spec} --no-serial --out ${WORK}/builtin.json)
device_of(${WORK}/builtin.json name)
if(NOT name STREQUAL "H200")
  message(FATAL_ERROR "without a config the device is ${name}, not H200")
endif()

# The default config file ($XDG_CONFIG_HOME/concord/config.yaml) sets it ...
file(WRITE ${config_dir}/config.yaml "# defaults\nbackend: sim\ndevice: h100\ntime_limit_s: 600\nlog_level: info\n")
expect_ok(${CONCORD} run ${spec} --no-serial --out ${WORK}/file.json)
device_of(${WORK}/file.json name)
if(NOT name STREQUAL "H100 SXM")
  message(FATAL_ERROR "the config file's device h100 was not used: ${name}")
endif()
# ... the environment overrides the file ...
set(ENV{CONCORD_DEVICE} h200)
expect_ok(${CONCORD} run ${spec} --no-serial --out ${WORK}/env.json)
device_of(${WORK}/env.json name)
if(NOT name STREQUAL "H200")
  message(FATAL_ERROR "CONCORD_DEVICE=h200 did not override the config file: ${name}")
endif()
# ... and a flag overrides both.
expect_ok(${CONCORD} run ${spec} --no-serial --device h100 --out ${WORK}/flag.json)
device_of(${WORK}/flag.json name)
if(NOT name STREQUAL "H100 SXM")
  message(FATAL_ERROR "--device h100 did not override CONCORD_DEVICE: ${name}")
endif()
unset(ENV{CONCORD_DEVICE})

# --config names another file; log_level error there silences the run's notes; -v wins over it.
file(WRITE ${WORK}/quiet.yaml "log_level: error\n")
execute_process(COMMAND ${CONCORD} --config ${WORK}/quiet.yaml run ${spec} --no-serial --out ${WORK}/quiet.json
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  message(FATAL_ERROR "log_level: error still printed (${rc}):\n${err}")
endif()
execute_process(COMMAND ${CONCORD} --config ${WORK}/quiet.yaml -v run ${spec} --no-serial --out ${WORK}/quiet.json
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
string(FIND "${err}" "results:" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "-v did not win over log_level: error (${rc}):\n${err}")
endif()

# The time limit from the file stops a run, and the flag lifts it.
file(WRITE ${WORK}/short.yaml "time_limit_s: 0.0001\n")
expect_error("time limit" ${CONCORD} --config ${WORK}/short.yaml run ${spec} --no-serial)
expect_ok(${CONCORD} --config ${WORK}/short.yaml run ${spec} --no-serial --time-limit 600)

# Bad values: the file and line, the field, the reason.
file(WRITE ${WORK}/bad-backend.yaml "device: h100\nbackend: tpu\n")
expect_exit(2 "bad-backend.yaml:2: field 'backend': 'tpu' is not one of sim, cuda"
                   ${CONCORD} --config ${WORK}/bad-backend.yaml policies)
file(WRITE ${WORK}/unknown.yaml "backend: sim\ncolour: blue\n")
expect_exit(2 "unknown.yaml:2: field 'colour': unknown (known: store, cache_dir, backend"
                   ${CONCORD} --config ${WORK}/unknown.yaml policies)
file(WRITE ${WORK}/twice.yaml "backend: sim\nbackend: cuda\n")
expect_exit(2 "twice.yaml:2: field 'backend': given twice" ${CONCORD} --config ${WORK}/twice.yaml policies)
file(WRITE ${WORK}/limit.yaml "time_limit_s: soon\n")
expect_exit(2 "limit.yaml:1: field 'time_limit_s': 'soon' is not a number of seconds"
                   ${CONCORD} --config ${WORK}/limit.yaml policies)
file(WRITE ${WORK}/pause.yaml "cuda_sweep_pause_us: -1\n")
expect_exit(2 "pause.yaml:1: field 'cuda_sweep_pause_us': '-1' is not an integer in 0..100000"
                   ${CONCORD} --config ${WORK}/pause.yaml policies)
file(WRITE ${WORK}/list.yaml "- backend\n")
expect_exit(2 "list.yaml:1: expected fields" ${CONCORD} --config ${WORK}/list.yaml policies)
file(WRITE ${WORK}/broken.yaml "backend: [sim\n")
expect_exit(2 "broken.yaml:" ${CONCORD} --config ${WORK}/broken.yaml policies)
expect_exit(2 "config file ${WORK}/none.yaml does not exist" ${CONCORD} --config ${WORK}/none.yaml policies)
set(ENV{CONCORD_LOG_LEVEL} loud)
expect_exit(2 "environment variable CONCORD_LOG_LEVEL (field 'log_level'): 'loud' is not one of" ${CONCORD} policies)
unset(ENV{CONCORD_LOG_LEVEL})
# A value that is checked where it is used names where it came from.
file(WRITE ${config_dir}/config.yaml "device: 0\n")
expect_exit(2 "field 'device' at ${config_dir}/config.yaml:1 '0': a GPU index needs --backend cuda"
                   ${CONCORD} run ${spec})
file(REMOVE ${config_dir}/config.yaml)
