"""Layer 1: every flat table's columns and every observation position, declared once.

The decision path keeps its state in flat arrays so that compiled code can read it: the simulator's per-job tables
and totals, the layout table, the candidate table, the observation encoder's constants and the observation itself.
Each of them is declared here, as a :class:`Table` of named columns in order, each with its meaning. The position
constants that code indexes with (``JF_REMAINING``, ``C_COST``, ``CAND_COST`` …) are looked up *by name* from these
declarations (:meth:`Table.positions`, which refuses a declaration it does not bind whole), so reordering or adding
a column is one edit here plus its computation in each backend; ``tests/test_tables.py`` checks that the backends
agree on every declared field, and that the docs' observation table is :func:`observation_markdown`.

This module imports nothing of the package: the compiled code, the Python code and the docs all read it.
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    """One column of a table: its name (snake case) and what it holds."""

    name: str
    meaning: str


class Table(NamedTuple):
    """Named columns in order. A variable-width tail (e.g. one column per region) follows the declared columns
    where ``tail`` says so."""

    name: str
    columns: tuple[Column, ...]
    tail: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def __len__(self) -> int:  # the number of declared columns
        return len(self.columns)

    def positions(self, *names: str) -> tuple[int, ...]:
        """The position of each of ``names``, which must be every column of the table (in any order): code that
        binds a table's columns binds all of them, so a column added here without its computation fails at import.
        """
        declared = self.names
        missing = sorted(set(declared) - set(names))
        unknown = sorted(set(names) - set(declared))
        if missing or unknown or len(names) != len(declared):
            raise ValueError(f"table {self.name!r}: bind every column once (missing {missing}, unknown {unknown})")
        return tuple(declared.index(n) for n in names)

    def pack(self, **fields):
        """A record of this table (one declared below as a packed record): its fields as a tuple in the declared
        order, each given by name, every one of them."""
        try:
            record = tuple([fields[column.name] for column in self.columns])
        except KeyError:
            record = ()
        if len(record) != len(fields):
            missing = sorted(set(self.names) - set(fields))
            unknown = sorted(set(fields) - set(self.names))
            raise ValueError(f"record {self.name!r}: give every field once (missing {missing}, unknown {unknown})")
        return record


def _table(name: str, *columns: tuple[str, str], tail: str = "") -> Table:
    return Table(name, tuple(Column(*c) for c in columns), tail)


# ----------------------------------------------------------------------------------------------- the simulator
SIM_TOTALS = _table(
    "simulator totals",
    ("energy_kwh", "facility energy so far, kWh"),
    ("cost_usd", "electricity cost so far, USD"),
    ("carbon_kg", "carbon so far, kg"),
    ("wan_bytes", "bytes sent over WAN links so far"),
    ("gpu_seconds", "allocated GPU·s so far"),
    ("job_seconds", "Σ over the jobs in the system of time: the JCT integral"),
)
ENERGY_KWH, COST_USD, CARBON_KG, WAN_BYTES, GPU_SECONDS, JOB_SECONDS = SIM_TOTALS.positions(
    "energy_kwh", "cost_usd", "carbon_kg", "wan_bytes", "gpu_seconds", "job_seconds"
)

# Rows of the simulator's per-job tables (J_F, J) and (J_I, J), indexed by job id in their columns: one array of
# each kind, rather than one per quantity, because numba's dispatch costs about 0.1 µs per array argument.
SIM_JOB_FLOATS = _table(
    "simulator per-job floats",
    ("remaining", "iterations left"),
    ("iteration", "iteration time at the job's rate, s"),
    ("wan_bytes", "bytes sent over WAN links per second"),
    ("demand", "no-stall rate per WAN hop, Gbit/s"),
    ("rate", "the last max-min fair allocation per hop, Gbit/s"),
    ("timed_rate", "the rate the job was last timed at, Gbit/s"),
)
JF_REMAINING, JF_ITERATION, JF_WAN_BYTES, JF_DEMAND, JF_RATE, JF_TIMED_RATE = SIM_JOB_FLOATS.positions(
    "remaining", "iteration", "wan_bytes", "demand", "rate", "timed_rate"
)
SIM_JOB_INTS = _table(
    "simulator per-job ints",
    ("num_links", "directed WAN links the job uses"),
    ("timed_capacity", "the capacity version the job was timed at"),
    ("stale", "scratch: the jobs to retime"),
)
JI_NUM_LINKS, JI_TIMED_CAPACITY, JI_STALE = SIM_JOB_INTS.positions("num_links", "timed_capacity", "stale")
NUM_JOB_FLOATS, NUM_JOB_INTS, NUM_TOTALS = len(SIM_JOB_FLOATS), len(SIM_JOB_INTS), len(SIM_TOTALS)
# ----------------------------------------------------------------------------------------- the schedule executor
EXECUTOR_INPUT = _table(
    "record: a pipeline as the schedule executor runs it (physics.schedule.ExecutorModel)",
    ("chunk_f", "(K,) each chunk's F time, s"),
    ("chunk_d", "(K,) its D time (its B time when the program does not split it), s"),
    ("chunk_w", "(K,) its W time (0 when the program does not split), s"),
    ("act_f", "(K,) the activation a chunk's F stores"),
    ("act_w", "(K,) the part of it its W still needs after D"),
    ("link_of", "(D·D,) the link from device a to device b at a·D + b"),
    ("link_x", "(L,) each link's message time at line rate, s"),
    ("link_lat", "(L,) each link's latency, s"),
    ("link_wan", "(L,) 1 for a link between regions"),
    ("budget", "(D,) the activation each device may hold (greedy programs; ≤ 0: no limit)"),
)
XI_CHUNK_F, XI_CHUNK_D, XI_CHUNK_W, XI_ACT_F, XI_ACT_W, XI_LINK_OF, XI_LINK_X, XI_LINK_LAT, XI_LINK_WAN, XI_BUDGET = (
    EXECUTOR_INPUT.positions(
        "chunk_f", "chunk_d", "chunk_w", "act_f", "act_w", "link_of", "link_x", "link_lat", "link_wan", "budget"
    )
)
EXECUTOR_OUTPUT = _table(
    "record: what a run of the schedule executor writes",
    ("busy", "(D,) each device's busy time, s"),
    ("end", "(D,) when each device ends its last op, s"),
    ("peak", "(D,) each device's peak activation"),
    ("order", "(N, 4) each started op as (device, kind, chunk, micro-batch), while rows are left (none: 0 rows)"),
    ("start", "(N,) each recorded op's start time, s"),
)
XO_BUSY, XO_END, XO_PEAK, XO_ORDER, XO_START = EXECUTOR_OUTPUT.positions("busy", "end", "peak", "order", "start")

# ------------------------------------------------------------------------------------------- the layout table
# Per layout (a job profile on a placement at fixed line rates) a row of floats and a row of ints; its placement
# lies in a flat int array and its 1F1B path lines (pipeline.ModelParts) in a flat float array.
LAYOUT_FLOATS = _table(
    "layout floats",
    ("base", "one micro-batch's round trip Σ(f+b) + 2Σ(x+l), s"),
    ("max_x", "the slowest hop's transfer time, s"),
    ("max_f", "GPipe: the slowest forward, s"),
    ("max_b", "GPipe: the slowest backward, s"),
    ("uni_f", "uniform 1F1B: the stages' forward time, s"),
    ("uni_b", "uniform 1F1B: the stages' backward time, s"),
    ("uni_s", "uniform 1F1B: the stage count"),
    ("uni_x", "uniform 1F1B: the hops' transfer time, s"),
    ("uni_lat", "uniform 1F1B: the hops' latency, s"),
    ("last_stage", "1F1B path family: f + b of the last stage, s"),
    ("constant", "1F1B path family: the longest path that does not depend on the step, s"),
    ("allreduce", "the data-parallel all-reduce per iteration, s"),
    ("demand", "no-stall rate per WAN hop, Gbit/s"),
    ("wan_bytes", "one cross-region message d·A, bytes"),
    ("memo_cadence", "executor: the cadence floor it was last timed at, or that the table asks for, s"),
    ("memo_total", "executor: the iteration time at that floor (without the all-reduce), s; NaN: asked for"),
)
(LF_BASE, LF_MAX_X, LF_MAX_F, LF_MAX_B, LF_UNI_F, LF_UNI_B, LF_UNI_S, LF_UNI_X, LF_UNI_LAT, LF_LAST_STAGE, LF_CONSTANT,
 LF_ALLREDUCE, LF_DEMAND, LF_WAN_BYTES, LF_MEMO_CADENCE, LF_MEMO_TOTAL) = LAYOUT_FLOATS.positions(
    "base", "max_x", "max_f", "max_b", "uni_f", "uni_b", "uni_s", "uni_x", "uni_lat", "last_stage", "constant",
    "allreduce", "demand", "wan_bytes", "memo_cadence", "memo_total",
)
LAYOUT_INTS = _table(
    "layout ints",
    ("kind", "how the model evaluates (pipeline.MODEL_*)"),
    ("m", "micro-batches per iteration"),
    ("profile", "the layout table's id of the job profile"),
    ("path", "where the placement's regions, then stages, start in the int array"),
    ("hops", "WAN hops: the path's length − 1"),
    ("arrays", "where the path lines start in the float array (tail slopes, intercepts, then segment slopes, "
               "starts, ends)"),
    ("tails", "tail lines"),
    ("segments", "segment lines"),
    ("schedule", "which of the job's accepted schedules it runs (an index into Job.schedules)"),
    ("wrap", "1 if its wrap from the last stage to the first takes a WAN link off the path"),
)
(LI_KIND, LI_M, LI_PROFILE, LI_PATH, LI_HOPS, LI_ARRAYS, LI_TAILS, LI_SEGMENTS, LI_SCHEDULE, LI_WRAP) = (
    LAYOUT_INTS.positions("kind", "m", "profile", "path", "hops", "arrays", "tails", "segments", "schedule", "wrap")
)
NUM_LAYOUT_FLOATS, NUM_LAYOUT_INTS = len(LAYOUT_FLOATS), len(LAYOUT_INTS)

# The 1F1B path family's index tables (pipeline.path_tables) as compiled code takes them: two packed read-only
# arrays, ints and floats, the ints starting with each field's start and length.
PATH_TABLE = _table(
    "1F1B path tables",
    ("tail_width", "S − the first stage of the tail loops"),
    ("tail_copies", "tail loops of that width"),
    ("tail_rest", "advances left after them"),
    ("segment", "first·S + last of a segment path's segment"),
    ("copies", "copies of the segment"),
    ("pre", "advances before the copies"),
    ("pre_loop", "the width of a tail loop standing in for the pre steps (S + 1: none)"),
    ("post_width", "the width of the tail loop after the copies (0: cool-down)"),
    ("cool_steps", "cool-down steps after the copies"),
    ("first_reach", "first + 1"),
    ("held", "K_d − 1 per stage"),
    ("run_reach", "1 + the deepest stage ≤ d that can run n steps"),
    ("turn_segment", "h·S + d of the cycled pairs"),
    ("turn_stage", "d"),
    ("turn_held", "held[d]"),
    ("turn_hop_reach", "h + 1"),
    ("turn_cycles", "cycles over [h, d]"),
    ("turn_steps", "steps after the cycles"),
    ("turn_reach", "1 + the deepest stage ≤ h that can run the turn's steps"),
    ("advances", "0 … n"),
    ("full_loops", "r // S"),
    ("part_loop", "r % S"),
)
(TAB_TAIL_WIDTH, TAB_TAIL_COPIES, TAB_TAIL_REST, TAB_SEGMENT, TAB_COPIES, TAB_PRE, TAB_PRE_LOOP, TAB_POST_WIDTH,
 TAB_COOL_STEPS, TAB_FIRST_REACH, TAB_HELD, TAB_RUN_REACH, TAB_TURN_SEGMENT, TAB_TURN_STAGE, TAB_TURN_HELD,
 TAB_TURN_HOP_REACH, TAB_TURN_CYCLES, TAB_TURN_STEPS, TAB_TURN_REACH, TAB_ADVANCES, TAB_FULL_LOOPS,
 TAB_PART_LOOP) = PATH_TABLE.positions(*PATH_TABLE.names)

# ---------------------------------------------------------------------------------------- the candidate table
PROFILE_INTS = _table(
    "candidate table: profile ints",
    ("table_id", "the layout table's id of the profile"),
    ("stages", "S"),
    ("stage_gpus", "GPUs per stage, t·d"),
    ("microbatches", "M"),
    tail="then one column per region: 1 where a stage fits its GPUs' memory",
)
P_TABLE_ID, P_STAGES, P_STAGE_GPUS, P_MICROBATCHES = PROFILE_INTS.positions(
    "table_id", "stages", "stage_gpus", "microbatches"
)
P_FITS = len(PROFILE_INTS)  # where the per-region memory fit starts
PROFILE_FLOATS = _table(
    "candidate table: profile floats",
    ("wan_bytes", "its cross-region message d·A, bytes"),
    ("busy_per_forward", "a stage's busy time per micro-batch in forward times: 1 + the backward ratio"),
    ("admit_per_forward", "the compute BACE-Pipe's admission lets one message take, in forward times"),
    tail="then one column per region: the profile's forward time of a stage on its GPUs, s",
)
PF_WAN_BYTES, PF_BUSY_PER_FORWARD, PF_ADMIT_PER_FORWARD = PROFILE_FLOATS.positions(
    "wan_bytes", "busy_per_forward", "admit_per_forward"
)
PF_FORWARD = len(PROFILE_FLOATS)  # where the per-region forward times start
CANDIDATE_JOB_INTS = _table(
    "candidate table: per-job int rows",
    ("profile", "the episode's profile of the job"),
    ("iterations", "iterations to train"),
)
J_PROFILE, J_ITERATIONS = CANDIDATE_JOB_INTS.positions("profile", "iterations")
CANDIDATE_FLOATS = _table(
    "candidate floats",
    ("iteration", "estimated iteration time, s"),
    ("duration", "estimated duration, s"),
    ("cost", "estimated electricity cost, USD"),
    ("carbon", "estimated carbon, kg"),
    ("rate", "the bandwidth per hop it would get now, Gbit/s"),
    ("demand", "its no-stall rate per hop, Gbit/s"),
    ("stalled", "1 if the rate is below the demand"),
    ("schedule", "which of the job's accepted schedules it would run (an index into Job.schedules)"),
)
C_ITERATION, C_DURATION, C_COST, C_CARBON, C_RATE, C_DEMAND, C_STALLED, C_SCHEDULE = CANDIDATE_FLOATS.positions(
    "iteration", "duration", "cost", "carbon", "rate", "demand", "stalled", "schedule"
)
NUM_CANDIDATE_FLOATS = len(CANDIDATE_FLOATS)

# ------------------------------------------------------------------------------------------------- observation
REGION_FEATURES = _table(
    "regions",
    ("present", "1 for a region of the world, 0 for padding"),
    ("free_gpu_fraction", "free GPUs ÷ the region's GPUs"),
    ("gpus_share", "the region's GPUs ÷ all GPUs"),
    ("price_now", "the price this hour ÷ the mean absolute price across regions"),
    ("price_forecast", "the mean price over the next 6 hours (this one included) ÷ the same across regions"),
    ("carbon", "carbon intensity this hour ÷ the episode's mean"),
    ("pue_excess", "PUE − 1"),
    ("link_utilization", "the mean utilisation of the region's outgoing links"),
    ("in_service", "GPUs in service (neither under repair nor away) ÷ the region's GPUs; 1 where GPUs never fail"),
)
(R_PRESENT, R_FREE_GPU_FRACTION, R_GPUS_SHARE, R_PRICE_NOW, R_PRICE_FORECAST, R_CARBON, R_PUE_EXCESS,
 R_LINK_UTILIZATION, R_IN_SERVICE) = REGION_FEATURES.positions(
    "present", "free_gpu_fraction", "gpus_share", "price_now", "price_forecast", "carbon", "pue_excess",
    "link_utilization", "in_service",
)
LINK_FEATURES = _table(
    "links",
    ("capacity", "capacity ÷ the largest link's"),
    ("utilization", "load ÷ capacity"),
    ("latency", "latency ÷ the largest link's"),
)
L_CAPACITY, L_UTILIZATION, L_LATENCY = LINK_FEATURES.positions("capacity", "utilization", "latency")
QUEUE_FEATURES = _table(
    "queue",
    ("present", "1 for a visible waiting job, 0 for an empty slot"),
    ("stages_share", "the job's GPUs ÷ all GPUs"),
    ("log_local_duration", "log(the in-region duration of the work it has left ÷ T_local)"),
    ("log_bandwidth_demand", "log(no-stall demand per hop ÷ the median link's capacity)"),
    ("waiting_time", "time waited ÷ T_local"),
    ("can_start", "1 if some candidate of the job is feasible"),
    ("lost_work", "computing time its interrupted runs lost to failures ÷ its in-region duration; 0 if never "
                  "interrupted"),
)
Q_PRESENT, Q_STAGES_SHARE, Q_LOG_LOCAL_DURATION, Q_LOG_BANDWIDTH_DEMAND, Q_WAITING_TIME, Q_CAN_START, Q_LOST_WORK = (
    QUEUE_FEATURES.positions(
        "present", "stages_share", "log_local_duration", "log_bandwidth_demand", "waiting_time", "can_start",
        "lost_work",
    )
)
CANDIDATE_FEATURES = _table(
    "candidates",
    ("feasible", "1 if the action launches a job"),
    ("log_iteration_vs_local", "log(estimated iteration time ÷ the job's in-region iteration time): its predicted "
                               "slowdown by the WAN (and by slower GPUs than the reference)"),
    ("log_duration", "log(estimated duration ÷ T_local)"),
    ("cost", "estimated electricity cost ÷ C_ref"),
    ("wan_hops", "WAN hops ÷ (R − 1)"),
    ("bandwidth_slack", "the rate it would get ÷ its demand (1 without WAN hops)"),
    ("stalled", "1 if that rate is below the demand"),
    ("carbon", "estimated carbon ÷ the carbon reference"),
    ("schedule", "the pipeline schedule it would run: its stable code (gpipe 0, 1f1b 1, interleaved-1f1b 2, zb-h1 3, "
                 "zbv 4, chimera 5, hanayo 6, crosspipe-greedy 7; a schedule added later takes the next) ÷ 7"),
)
(CAND_FEASIBLE, CAND_LOG_ITERATION_VS_LOCAL, CAND_LOG_DURATION, CAND_COST, CAND_WAN_HOPS, CAND_BANDWIDTH_SLACK,
 CAND_STALLED, CAND_CARBON, CAND_SCHEDULE) = CANDIDATE_FEATURES.positions(
    "feasible", "log_iteration_vs_local", "log_duration", "cost", "wan_hops", "bandwidth_slack", "stalled", "carbon",
    "schedule",
)
GLOBAL_FEATURES = _table(
    "global",
    ("hour_sin", "sin(2π · hour of day ÷ 24)"),
    ("hour_cos", "cos(2π · hour of day ÷ 24)"),
    ("queue_beyond_window", "waiting jobs beyond the Q visible ÷ Q"),
    ("running_jobs", "running jobs ÷ the episode's jobs"),
    ("gpu_utilization", "allocated GPUs ÷ all GPUs"),
    ("time_fraction", "time ÷ horizon"),
    ("mean_link_utilization", "the mean utilisation of all links"),
    ("wait_gap", "log(1 + Δt ÷ T_local) for the Δt a wait would skip: to the next arrival, completion or hour tick, "
                 "or the horizon"),
    ("time_scale", "log(T_ref ÷ T_local): what the reward divides time by (T_ref) in the unit of the duration "
                   "features (T_local); constant over an episode"),
)
(G_HOUR_SIN, G_HOUR_COS, G_QUEUE_BEYOND_WINDOW, G_RUNNING_JOBS, G_GPU_UTILIZATION, G_TIME_FRACTION,
 G_MEAN_LINK_UTILIZATION, G_WAIT_GAP, G_TIME_SCALE) = GLOBAL_FEATURES.positions(
    "hour_sin", "hour_cos", "queue_beyond_window", "running_jobs", "gpu_utilization", "time_fraction",
    "mean_link_utilization", "wait_gap", "time_scale",
)
# The observation's keys in order: (key, features, rows). Rows are a count of the env's own (``max_regions``,
# ``max_regions²`` links, ``Q`` queue slots, ``Q·K`` candidates, one global row).
OBSERVATION = (
    ("regions", REGION_FEATURES, "max_regions"),
    ("links", LINK_FEATURES, "max_regions² (row i·max_regions + j: link i→j)"),
    ("queue", QUEUE_FEATURES, "Q (the oldest waiting jobs)"),
    ("candidates", CANDIDATE_FEATURES, "Q·K (row a: action a)"),
    ("global", GLOBAL_FEATURES, "1"),
)

# ------------------------------------------------------------------------- packed records of the compiled calls
# A compiled entry point takes a few records instead of a long list of arrays. Each record is a tuple, declared here
# as a table of named fields; the caller builds it with Table.pack (by name), and the compiled code reads a field
# at its position (numba indexes a tuple by a constant at compile time, and a tuple costs about what its arrays
# cost as separate arguments).
LAYOUT_ARRAYS = _table(
    "record: a layout table's arrays",
    ("index", "(N,) open-addressed index from a placement's hash to its layout id (EMPTY_SLOT where free)"),
    ("layout_f", "(L, LAYOUT_FLOATS) each layout's floats"),
    ("layout_i", "(L, LAYOUT_INTS) each layout's ints"),
    ("arrays", "the layouts' variable-length lines, one after another"),
    ("places", "the layouts' placements: regions then stages, one after another"),
)
LA_INDEX, LA_LAYOUT_F, LA_LAYOUT_I, LA_ARRAYS, LA_PLACES = LAYOUT_ARRAYS.positions(
    "index", "layout_f", "layout_i", "arrays", "places"
)
LAYOUT_JOB = _table(
    "record: the job profile a layout times",
    ("forward_r", "(R,) a stage's forward time per micro-batch on each region's GPUs, s"),
    ("backward_ratio", "backward time ÷ forward time"),
    ("activation_bytes", "a boundary's message inside a region, bytes"),
    ("wan_message_bytes", "a boundary's message between regions, bytes"),
    ("allreduce_s", "the data-parallel all-reduce per iteration, s"),
    ("microbatches", "M"),
    ("gpipe", "True for GPipe, False for 1F1B"),
    ("tab_i", "pipeline.packed_path_tables(S, max(M − 1, 1)): ints"),
    ("tab_f", "the same: floats"),
    ("profile", "the layout table's id of the profile"),
)
(LJ_FORWARD_R, LJ_BACKWARD_RATIO, LJ_ACTIVATION_BYTES, LJ_WAN_MESSAGE_BYTES, LJ_ALLREDUCE_S, LJ_MICROBATCHES, LJ_GPIPE,
 LJ_TAB_I, LJ_TAB_F, LJ_PROFILE) = LAYOUT_JOB.positions(
    "forward_r", "backward_ratio", "activation_bytes", "wan_message_bytes", "allreduce_s", "microbatches", "gpipe",
    "tab_i", "tab_f", "profile"
)
LAYOUT_NETWORK = _table(
    "record: the links a layout is timed on",
    ("line_gbps", "(R, R) each directed link's line rate, Gbit/s"),
    ("latency", "(R, R) each link's one-way latency, s"),
    ("intra_gbps", "a region's internal bandwidth, Gbit/s"),
    ("intra_latency_s", "a region's internal latency, s"),
)
LN_LINE_GBPS, LN_LATENCY, LN_INTRA_GBPS, LN_INTRA_LATENCY_S = LAYOUT_NETWORK.positions(
    "line_gbps", "latency", "intra_gbps", "intra_latency_s"
)
DECISION_STATE = _table(
    "record: the cluster at a decision",
    ("now_s", "the decision instant, s"),
    ("free_gpus", "(R,) free GPUs per region"),
    ("capacity", "(R, R) each directed link's capacity now, Gbit/s"),
    ("link_load", "(R, R) each directed link's load now, Gbit/s"),
)
DS_NOW_S, DS_FREE_GPUS, DS_CAPACITY, DS_LINK_LOAD = DECISION_STATE.positions("now_s", "free_gpus", "capacity", "link_load")
CANDIDATE_WORLD = _table(
    "record: the world the candidate table prices",
    ("links", "(2, R, R) link capacities (> 0 where linked) and latencies"),
    ("region_f", "(5, R) per region: busy W per TFLOPS × PUE, idle W, busy W, PUE, GPU count"),
    ("price_prefix", "(R, H + 1) the hourly price series' running integral (HourlyIntegral)"),
    ("price_values", "(R, H) the hourly prices"),
    ("carbon_prefix", "(R, H + 1) the same for carbon intensity"),
    ("carbon_values", "(R, H) the hourly carbon intensities"),
)
CW_LINKS, CW_REGION_F, CW_PRICE_PREFIX, CW_PRICE_VALUES, CW_CARBON_PREFIX, CW_CARBON_VALUES = CANDIDATE_WORLD.positions(
    "links", "region_f", "price_prefix", "price_values", "carbon_prefix", "carbon_values"
)
CANDIDATE_JOBS = _table(
    "record: an episode's jobs, as the candidate table reads them",
    ("profile_f", "(P, PROFILE_FLOATS + R) per job profile"),
    ("profile_i", "(P, PROFILE_INTS + R) per job profile"),
    ("job_i", "(CANDIDATE_JOB_INTS, J) per job: its profile and iterations"),
    ("job_run_s", "(J,) per job: its isolated duration, s"),
    ("strategies", "(K,) the strategy codes of the columns (negative: a column the caller fills)"),
)
CJ_PROFILE_F, CJ_PROFILE_I, CJ_JOB_I, CJ_JOB_RUN_S, CJ_STRATEGIES = CANDIDATE_JOBS.positions(
    "profile_f", "profile_i", "job_i", "job_run_s", "strategies"
)
CANDIDATE_OUTPUT = _table(
    "record: the candidate table, written by the candidate table's kernel and read by the encoder (and the "
    "placements the caller gives it for the columns of registered strategies)",
    ("candidate_of", "(Q, K) the candidate behind each action (−1: masked); rows past the visible jobs' stay −1"),
    ("candidate_f", "(C, CANDIDATE_FLOATS) each candidate's figures"),
    ("candidate_place", "(C, 2R) each candidate's regions then stages"),
    ("candidate_length", "(C,) each candidate's path length"),
    ("misses", "(X, 2R + 2) the layouts the table lacks, or executor layouts to time (LayoutTable.time_requested)"),
    ("given", "(Q, K, 2R + 1) read: per visible job, the placement its registered strategy's Python rule gives in "
              "column k (a column of negative code): path length (0: none), regions, stages"),
)
CO_CANDIDATE_OF, CO_CANDIDATE_F, CO_CANDIDATE_PLACE, CO_CANDIDATE_LENGTH, CO_MISSES, CO_GIVEN = (
    CANDIDATE_OUTPUT.positions("candidate_of", "candidate_f", "candidate_place", "candidate_length", "misses", "given")
)
ENCODER_EPISODE = _table(
    "record: what the compiled encoder keeps for an episode",
    ("template", "the flat observation with every constant feature written"),
    ("constants_i", "ENCODER_INTS then its tail"),
    ("constants_f", "ENCODER_FLOATS"),
    ("hourly", "(H, R, 3) the regions' price, forecast and carbon features per hour"),
    ("job_table", "(J, ENCODER_JOBS + 8) per job"),
)
EE_TEMPLATE, EE_CONSTANTS_I, EE_CONSTANTS_F, EE_HOURLY, EE_JOB_TABLE = ENCODER_EPISODE.positions(
    "template", "constants_i", "constants_f", "hourly", "job_table"
)
ENCODER_STATE = _table(
    "record: what the compiled encoder reads at a decision",
    ("now_s", "the decision instant, s"),
    ("hour", "the hour of the episode whose features apply"),
    ("free_gpus", "(R,) free GPUs per region"),
    ("link_load", "(R, R) each directed link's load, Gbit/s"),
    ("utilization_base", "(R, R) what a link's load is divided by for its utilisation"),
    ("num_waiting", "jobs waiting"),
    ("num_running", "jobs running"),
    ("gap_s", "the time a wait would skip, s"),
    ("in_service", "(R,) GPUs in service per region"),
    ("work_left", "(J,) each job's iterations left"),
    ("lost_s", "(J,) each job's computing time lost to failures, s"),
)
(ES_NOW_S, ES_HOUR, ES_FREE_GPUS, ES_LINK_LOAD, ES_UTILIZATION_BASE, ES_NUM_WAITING, ES_NUM_RUNNING, ES_GAP_S,
 ES_IN_SERVICE, ES_WORK_LEFT, ES_LOST_S) = ENCODER_STATE.positions(
    "now_s", "hour", "free_gpus", "link_load", "utilization_base", "num_waiting", "num_running", "gap_s",
    "in_service", "work_left", "lost_s",
)
# -------------------------------------------------------------------------------------- the encoder's constants
# The compiled encoder's constants, grouped into one int and one float array (numba's dispatch costs about 30 ns
# per number and 0.1 µs per array argument).
ENCODER_INTS = _table(
    "encoder ints",
    ("regions", "the world's region count R"),
    ("regions_at", "where the regions table starts in the flat observation"),
    ("links_at", "where the links table starts"),
    ("queue_at", "where the queue table starts"),
    ("candidates_at", "where the candidates table starts"),
    ("global_at", "where the global row starts"),
    tail="then per link i·R + j where its utilisation goes and whether it exists (R² each), then per region its "
         "GPUs and outgoing links (R each)",
)
I_REGIONS, I_REGIONS_AT, I_LINKS_AT, I_QUEUE_AT, I_CANDIDATES_AT, I_GLOBAL_AT = ENCODER_INTS.positions(
    "regions", "regions_at", "links_at", "queue_at", "candidates_at", "global_at"
)
ENCODER_FLOATS = _table(
    "encoder floats",
    ("t_local", "T_local: the jobs' mean in-region duration, s"),
    ("num_jobs", "the episode's jobs"),
    ("total_gpus", "all GPUs"),
    ("start_hour", "the episode's first hour of 2023"),
    ("horizon", "the horizon, s"),
    ("num_links", "directed WAN links"),
    ("c_ref", "C_ref, USD"),
    ("carbon_ref", "the carbon reference, kg"),
    ("time_scale", "the global feature time_scale, log(T_ref ÷ T_local)"),
)
F_T_LOCAL, F_NUM_JOBS, F_TOTAL_GPUS, F_START_HOUR, F_HORIZON, F_NUM_LINKS, F_C_REF, F_CARBON_REF, F_TIME_SCALE = (
    ENCODER_FLOATS.positions(
        "t_local", "num_jobs", "total_gpus", "start_hour", "horizon", "num_links", "c_ref", "carbon_ref", "time_scale"
    )
)
ENCODER_JOBS = _table(
    "encoder per-job table",
    ("share", "the job's GPUs ÷ all GPUs"),
    ("log_demand", "log(typical demand ÷ the median link)"),
    ("arrival", "arrival time, s"),
    ("local_iteration", "in-region iteration time, s"),
    ("local_duration", "in-region duration (iterations × in-region iteration time), s"),
    tail="then one column per schedule the job may accept (up to eight): the CAND_SCHEDULE value of its i-th",
)
JOB_SHARE, JOB_LOG_DEMAND, JOB_ARRIVAL, JOB_LOCAL_ITERATION, JOB_LOCAL_DURATION = ENCODER_JOBS.positions(
    "share", "log_demand", "arrival", "local_iteration", "local_duration"
)
JOB_SCHEDULES = len(ENCODER_JOBS)  # where the job's accepted schedules' codes start (physics.schedule.MAX_SCHEDULES)


def observation_markdown() -> str:
    """The docs' observation table (docs/environment.md): one row per feature, in the declared order."""
    lines = ["| key | rows | column | feature | meaning |", "|---|---|---|---|---|"]
    for key, table, rows in OBSERVATION:
        for i, column in enumerate(table.columns):
            lines.append(f"| `{key}` | {rows if i == 0 else ''} | {i} | `{column.name}` | {column.meaning} |")
    return "\n".join(lines)
