# ctest's cpp_package: the C++ package as a C++ user gets it from this build, with no
# Python anywhere. `cmake --install` into a fresh prefix, examples/cpp configured with
# find_package(zenith) against that prefix alone, built, and run: each program's usage
# (exit 2) and a missing model file (exit 1, the runtime's error).
# tests/python/test_cpp_package.py runs them on real exported models against eager.
#   cmake -DBUILD=<this build> -DSOURCE=<the source tree> -P package_test.cmake
set(work ${BUILD}/package-test)
file(REMOVE_RECURSE ${work})

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD} --prefix ${work}/prefix)
foreach(f lib/libzenith.a include/zenith/zenith.h lib/cmake/zenith/zenithConfig.cmake bin/zenith-run)
  if(NOT EXISTS ${work}/prefix/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
step(${CMAKE_COMMAND} -S ${SOURCE}/examples/cpp -B ${work}/examples -DCMAKE_PREFIX_PATH=${work}/prefix
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
step(${CMAKE_COMMAND} --build ${work}/examples)

foreach(example embed generate)
  execute_process(COMMAND ${work}/examples/${example} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "usage: ${example} MODEL")
    message(FATAL_ERROR "${example} without arguments: exit ${rc}, ${err}")
  endif()
  execute_process(COMMAND ${work}/examples/${example} ${work}/missing.zenith 101,102 RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "missing.zenith: cannot open")
    message(FATAL_ERROR "${example} on a missing file: exit ${rc}, ${err}")
  endif()
endforeach()
message(STATUS "the installed package builds and runs examples/cpp")
