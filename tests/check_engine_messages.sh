#!/usr/bin/env bash
# The engine says what is wrong in its own terms (the device spec, the process-group backend, the
# timeout, the launcher's variables such as MASTER_ADDR or DPV_TIMEOUT); the command-line flags
# belong to dpv, which adds the flag that supplied a value (cli/flag_errors.h, cli/launcher.cpp).
# The app shows the same engine messages, where a flag would mean nothing.
# Prints every string literal of engine/ or kernels/ that names a flag ("--devices", "--timeout")
# as file:line: "literal", and exits 1; exits 0 when there is none. Comments may name flags.
# Usage: check_engine_messages.sh <source root>
set -u
root=${1:?usage: check_engine_messages.sh <source root>}
cd "$root" || exit 2

# Perl walks each file once: comments are skipped, each string literal is checked, and the line
# number is counted up to it (a grep over lines would match flags in comments, or "--i" in code).
hits=$(find engine kernels -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
  sort -z |
  xargs -0 perl -0777 -ne '
    while (m{ ( "(?:[^"\\\n]|\\.)*" ) | '"'"'(?:[^'"'"'\\\n]|\\.)*'"'"' | //[^\n]* | /\*.*?\*/ }gsx) {
      next unless defined $1;
      my ($literal, $at) = ($1, $-[0]);  # before the next match overwrites @-
      next unless $literal =~ /(?:^"|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*/;
      my $line = 1 + (substr($_, 0, $at) =~ tr/\n//);
      print "$ARGV:$line: $literal\n";
    }')
status=$?
if [[ $status -gt 1 ]]; then
  echo "check_engine_messages.sh: the scan failed (status $status)"
  exit 2
fi
if [[ -n $hits ]]; then
  echo "engine messages name command-line flags (say it in the engine's terms; the CLI adds the flag):"
  echo "$hits"
  exit 1
fi
exit 0
