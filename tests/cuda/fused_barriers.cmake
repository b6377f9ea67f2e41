# A fused kernel names its barriers by constants, so ptxas reserves parts + 1 of them (a barrier
# ID held in a register made it reserve all 16, which capped fused kernels at 4 blocks per SM).
# Compiles tests/cuda/fused_barriers_probe.cu at several part counts with -Xptxas -v and reads
# "used N barriers". Run as
#   cmake -DNVCC=<nvcc> -DSRC=<repo> -DWORK=<scratch> -P fused_barriers.cmake
set(failures "")
foreach(parts 2 5 15)
  execute_process(
    COMMAND ${NVCC} -std=c++20 -arch=sm_90 -cubin -Xptxas -v --expt-relaxed-constexpr -DFUSED_PARTS=${parts}
            -I${SRC}/include -I${SRC}/src -o ${WORK}/fused_barriers_${parts}.cubin ${SRC}/tests/cuda/fused_barriers_probe.cu
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(APPEND failures "  ${parts} parts: nvcc failed (${rc}): ${err}\n")
    continue()
  endif()
  string(REGEX MATCH "used ([0-9]+) barriers" found "${out}${err}")
  math(EXPR want "${parts} + 1")
  if(NOT found)
    string(APPEND failures "  ${parts} parts: ptxas reported no barrier count:\n${out}${err}\n")
  elseif(NOT CMAKE_MATCH_1 EQUAL want)
    string(APPEND failures "  ${parts} parts: ${CMAKE_MATCH_1} barriers reserved, want ${want}\n")
  else()
    message(STATUS "fused_barriers: ${parts} parts reserve ${CMAKE_MATCH_1} barriers")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "fused_barriers:\n${failures}")
endif()
