# SPDX-License-Identifier: BSD-3-Clause
# A Debian image with Remora built, tested and installed.
#   docker build -t remora .
#   docker run --rm remora remora train default.json --out /tmp/run
# The build runs the README's two commands: the test suite, then the main job
# (a short training run); `cmake --install` puts the driver, the library, the
# headers, the configs and the sample data under /usr/local. tools/scripts/setup.sh
# installs the Debian packages the build needs.
FROM debian:bookworm
WORKDIR /src/remora
COPY . .
RUN bash tools/scripts/test.sh \
    && bash tools/scripts/run.sh --set train.steps=20 \
    && cmake --install build --prefix /usr/local \
    && rm -rf out build/Testing
WORKDIR /work
CMD ["remora", "--help"]
