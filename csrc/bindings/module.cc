#include "convert.h"

NB_MODULE(_C, m) {
  m.doc() = "Zenith's C++ core: IR, passes and CPU runtime";
  // Compiled graphs held by Dynamo's caches are still alive at interpreter exit;
  // that is expected, not a reference leak worth a warning to every user.
  nanobind::set_leak_warnings(false);
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const zenith::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::bad_alloc& e) {  // zenith::OutOfMemory (with its size) or any other
      PyErr_SetString(PyExc_MemoryError, e.what());
    }
  });
  zenith::py::init_ir(m);
  zenith::py::init_runtime(m);
  zenith::py::init_quant(m);
  zenith::py::init_model(m);
}
