# find_package(Remora) -> the imported targets remora::remora (the library),
# remora::remora_dist (data parallelism) and remora::remora_train (the Trainer).
include("${CMAKE_CURRENT_LIST_DIR}/RemoraTargets.cmake")
