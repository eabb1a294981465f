# stage MESSAGE: prints MESSAGE with the time of day and the time since the sourcing script
# started, so every script's stages show where a run's minutes went. Sourced, not run.
dpv_stage_clock_start=${dpv_stage_clock_start:-$(date +%s)}
stage() {
  local elapsed=$(($(date +%s) - dpv_stage_clock_start))
  printf '== [%s, %dm%02ds] %s\n' "$(date -u +%H:%M:%S)" $((elapsed / 60)) $((elapsed % 60)) "$*"
}
