# A Nomad batch job of 8 agents, quietus as each task's entrypoint (docs/fleet.md).
#
# Nomad's restart and reschedule policies do not look at the exit status: every non-zero
# exit (a stall, 75; a hard timeout, 76; quietus's own, 125) is retried alike, up to the
# attempts below. The task's events show the exit code, and the report and the termination
# message (in the allocation's folder) say why. To never retry a hard timeout, map it to 0 in
# a shell wrapper (`quietus … ; s=$?; [ $s -eq 76 ] && exit 0; exit $s`): the report still
# says hard_timeout.
job "agents" {
  type = "batch"

  group "agent" {
    count = 8

    # Retries in place, on the same node: a stalled agent gets two more tries.
    restart {
      attempts = 2
      interval = "24h"
      delay    = "15s"
      mode     = "fail"
    }

    # Then once on another node, and no more.
    reschedule {
      attempts  = 1
      interval  = "24h"
      unlimited = false
    }

    task "agent" {
      driver = "docker"

      config {
        image      = "registry.example.com/agents/agent:1.0.0"
        entrypoint = ["/usr/local/bin/quietus"]
        args = [
          "--report", "${NOMAD_ALLOC_DIR}/quietus-report.json",
          "--termination-message", "${NOMAD_ALLOC_DIR}/termination-message",
          "--",
          "/usr/local/bin/agent", "--task-index", "${NOMAD_ALLOC_INDEX}",
        ]
      }

      env {
        QUIETUS_IDLE_TIMEOUT           = "15m"
        QUIETUS_HARD_TIMEOUT           = "4h"
        QUIETUS_GRACE                  = "10s"
        QUIETUS_WATCH                  = "/work/.agent"
        QUIETUS_EXIT_CODE_STALL        = "75"
        QUIETUS_EXIT_CODE_HARD_TIMEOUT = "76"
        QUIETUS_NON_INTERACTIVE        = "1"
      }

      # Above quietus's grace: Nomad's TERM reaches quietus, which ends the tree with its own
      # ladder before Nomad's KILL.
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 2048
      }
    }
  }
}
