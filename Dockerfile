# dtrain in a container: build with the CUDA toolkit, run on the CUDA runtime image.
#   docker build -t dtrain .
#   docker run --rm --gpus all dtrain doctor
# The base tag is pinned to the CUDA release this repository is built and tested with (13.0 update 1,
# nvcc 13.0.88): a CUDA 13 build needs a host driver that supports CUDA 13 (`dtrain doctor` checks it).
# docs/containers.md says how to run it under srun/mpirun (host MPI vs container MPI, PMIx).

ARG CUDA_TAG=13.0.1
ARG UBUNTU=ubuntu24.04

# ---- build stage: compilers, headers, the toolkit ----
FROM nvidia/cuda:${CUDA_TAG}-devel-${UBUNTU} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The same libraries as the Makefile's DEB_PKGS (Open MPI with PMIx, hwloc, OpenBLAS, zlib, JPEG,
# PNG), NCCL from the CUDA repository the base image already trusts; no test-only packages.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake make gcc g++ pkg-config openmpi-bin libopenmpi-dev libpmix-dev libhwloc-dev \
      libopenblas-dev zlib1g-dev libturbojpeg0-dev libpng-dev libnccl2 libnccl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . /src
# sm_80 and sm_90 as in the tree's default (no GPU is visible while building); no tests in the image.
RUN cmake -S . -B /build -DDTRAIN_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
      -DCMAKE_CUDA_ARCHITECTURES="80;90" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j "$(nproc)" \
 && cmake --install /build --prefix /opt/dtrain

# ---- run stage: the CUDA runtime and the shared libraries dtrain links, nothing to compile with ----
FROM nvidia/cuda:${CUDA_TAG}-runtime-${UBUNTU} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openmpi-bin libopenmpi3t64 libpmix2t64 libhwloc15 libopenblas0-pthread zlib1g \
      libturbojpeg libpng16-16t64 libnccl2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/dtrain /opt/dtrain
ENV PATH=/opt/dtrain/bin:${PATH}
# Not root: nothing in a training job needs it, and Open MPI refuses root without extra variables.
# Ubuntu's images from 23.04 on ship a user "ubuntu" with uid 1000: it makes way for dtrain.
RUN if id -u ubuntu >/dev/null 2>&1; then userdel --remove ubuntu; fi \
 && useradd --create-home --uid 1000 --shell /bin/bash dtrain
USER 1000:1000
WORKDIR /home/dtrain
ENTRYPOINT ["dtrain"]
CMD ["help"]
