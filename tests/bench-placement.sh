#!/bin/bash
# Placement latency benchmark (issue #5): exec -> pid visible in the target
# cgroup, over an exec storm of short-lived processes, with the process-events
# connector and with the /proc-scan fallback (CGWARDEN_NO_PROC_EVENTS=1) as
# the baseline; plus the daemon's CPU time per 1,000 execs. Numbers, not asserts.
#
#   sudo bash tests/bench-placement.sh CGWARDEN [N=10000] [LIFE_MS=30] [TICK=100ms]
#
# Runs on the host's cgroup2 mount as DEVELOPERS.md allows: only groups named
# cgwarden-bench-* under /sys/fs/cgroup/unified (no controllers), a policy whose
# only placement rule matches the benchmark's own child program, state in /tmp;
# it moves and kills only the processes it started and removes its groups.
#
# Latency: each child records, from its own start, when /proc/self/cgroup first
# names the target (polled every 100 us; same membership cgroup.procs lists);
# the driver subtracts the time its posix_spawn returned (the exec happened).
# A child that never sees itself placed within its LIFE_MS is "never placed".
set -euo pipefail
BIN=$(readlink -f "${1:?usage: bench-placement.sh CGWARDEN [N] [LIFE_MS] [TICK]}")
N=${2:-10000}
LIFE=${3:-30}
TICK=${4:-100ms}
MNT=${CGWARDEN_BENCH_MOUNT:-/sys/fs/cgroup/unified}
GROUP=cgwarden-bench-a
W=$(mktemp -d /tmp/cgwarden-bench.XXXXXX)
trap 'kill $DPID 2>/dev/null || true; wait 2>/dev/null || true; rmdir "$MNT/$GROUP" 2>/dev/null || true; rm -rf "$W"' EXIT
DPID=

[ -e "$MNT/cgroup.procs" ] || { echo "no cgroup2 mount at $MNT" >&2; exit 2; }

cat >"$W/bench.c" <<'EOF'
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <pthread.h>
extern char **environ;
static long long now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
struct rec{int pid;long long seen;};
/* child: poll /proc/self/cgroup until it names the target, report, live out LIFE ms */
static int child(const char*target,int life_ms){
  long long t0=now(),end=t0+life_ms*1000000LL,seen=0;char buf[512];
  while(now()<end){
    int fd=open("/proc/self/cgroup",O_RDONLY);int n=read(fd,buf,sizeof buf-1);close(fd);
    if(n>0){buf[n]=0;if(strstr(buf,target)){seen=now();break;}}
    usleep(100);
  }
  struct rec r={getpid(),seen};write(3,&r,sizeof r);
  long long left=end-now(); if(left>0) usleep(left/1000);
  return 0;
}
static int n_total; static long long *spawned; static int *pids;
static struct rec *recs; static int nrec;
static void *reader(void*a){int fd=*(int*)a;struct rec r;while(read(fd,&r,sizeof r)==sizeof r)recs[nrec++]=r;return 0;}
static int cmp(const void*a,const void*b){long long x=*(long long*)a,y=*(long long*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  if(argc>=4&&!strcmp(argv[1],"child"))return child(argv[2],atoi(argv[3]));
  /* driver: bench CHILD_PATH TARGET N LIFE_MS PARALLEL */
  const char*path=argv[1],*target=argv[2];n_total=atoi(argv[3]);int life=atoi(argv[4]);int par=atoi(argv[5]);
  spawned=calloc(n_total,sizeof *spawned);pids=calloc(n_total,sizeof *pids);recs=calloc(n_total,sizeof *recs);
  int p[2];pipe(p);pthread_t th;pthread_create(&th,0,reader,&p[0]);
  posix_spawn_file_actions_t fa;posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa,p[1],3);
  char lifes[16];snprintf(lifes,sizeof lifes,"%d",life);
  char*cargv[]={(char*)"cgwbench-child",(char*)"child",(char*)target,lifes,0};
  int running=0;long long t0=now();
  for(int i=0;i<n_total;i++){
    while(running>=par){if(waitpid(-1,0,0)>0)running--;}
    int pid;if(posix_spawn(&pid,path,&fa,0,cargv,environ)!=0){perror("spawn");return 1;}
    spawned[i]=now();pids[i]=pid;running++;
  }
  while(running>0){if(waitpid(-1,0,0)>0)running--;}
  long long t1=now();close(p[1]);pthread_join(th,0);
  long long*lat=calloc(n_total,sizeof *lat);int nl=0,never=0;
  for(int j=0;j<nrec;j++){int i;for(i=0;i<n_total&&pids[i]!=recs[j].pid;i++);
    /* pids can be reused; take the latest spawn with this pid before `seen` */
    int best=-1;for(int k=0;k<n_total;k++)if(pids[k]==recs[j].pid)best=k; i=best;
    if(i<0)continue; if(!recs[j].seen){never++;continue;}
    long long d=recs[j].seen-spawned[i]; lat[nl++]=d<0?0:d;}
  qsort(lat,nl,sizeof *lat,cmp);
  #define MS(x) ((x)/1e6)
  printf("execs %d in %.2fs (%.0f/s), reports %d, placed %d, never placed %d (alive %d ms each)\n",
    n_total,(t1-t0)/1e9,n_total/((t1-t0)/1e9),nrec,nl,never,life);
  if(nl)printf("latency ms: p50 %.3f p90 %.3f p99 %.3f max %.3f\n",MS(lat[nl/2]),MS(lat[nl*9/10]),MS(lat[nl*99/100]),MS(lat[nl-1]));
  return 0;
}
EOF
cc -O2 -pthread -o "$W/cgwbench-child" "$W/bench.c"
# The driver must not match the rule itself (its children would inherit the group).
cp "$W/cgwbench-child" "$W/cgwbench-drive"

cat >"$W/policy.yaml" <<EOF
version: 1
product: placement-bench
settings:
  cgroup_root: $MNT
  state_dir: $W/state
  rescan: 30s
groups:
  $GROUP: {}
placement:
  - match: { comm: cgwbench-child }
    group: $GROUP
EOF

run() { # LABEL ENV...
    local label=$1
    shift
    env "$@" "$BIN" run "$W/policy.yaml" --tick "$TICK" 2>"$W/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do grep -q "cgwarden running" "$W/daemon.log" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    local c0 c1
    c0=$(awk '{print $14+$15}' /proc/$DPID/stat)
    echo "== $label"
    "$W/cgwbench-drive" "$W/cgwbench-child" "/$GROUP" "$N" "$LIFE" 8
    sleep 0.3
    c1=$(awk '{print $14+$15}' /proc/$DPID/stat)
    local hz
    hz=$(getconf CLK_TCK)
    awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$N" 'BEGIN{printf "daemon CPU: %.1f ms per 1000 execs\n", c*1000/hz/n*1000}'
    kill -TERM $DPID
    wait $DPID || true
    DPID=
    grep -E "connector|scanning|placement:" "$W/daemon.log" | sed "s/^/  log| /" | tail -3
}

run "process-events connector" CGWARDEN_LOG=info
run "/proc-scan fallback (tick $TICK)" CGWARDEN_LOG=info CGWARDEN_NO_PROC_EVENTS=1
