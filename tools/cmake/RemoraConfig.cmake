# find_package(Remora) -> the imported target remora::remora
include("${CMAKE_CURRENT_LIST_DIR}/RemoraTargets.cmake")
