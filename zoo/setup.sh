#!/bin/sh
# The real tools the zoo's fixtures run (zoo-tool headers), from Debian's packages; the Rust
# toolchain (cargo, rustc) is the project's own (rustup). Run as root, once per machine:
#   sh zoo/setup.sh
# then `python3 zoo/run.py --check-tools` says what is still missing. Nothing else is fetched:
# the servers the fixtures talk to are the runner's own, on 127.0.0.1.
set -eu
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  git curl wget openssh-client make gcc xz-utils tar npm python3 python3-pip util-linux coreutils
