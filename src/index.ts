/**
 * valet: agent architectures as Effect programs that stream typed events.
 *
 * @since 0.1.0
 */

/** Actor-Critic: an actor agent answers and revises, a critic agent scores, until approval or the last round. */
export * as ActorCritic from "./architectures/ActorCritic.js"

/** The RL actor loop: prompt with state, model, sandboxed action, state update, trajectory record. */
export * as ActorLoop from "./rollouts/ActorLoop.js"

/** Agents: definitions, runs, streams and sub-agents. */
export * as Agent from "./core/Agent.js"

/** The errors an agent run can fail with. */
export * as AgentError from "./core/AgentError.js"

/** The events a run streams, and helpers to filter and rebuild them. */
export * as AgentEvent from "./core/AgentEvent.js"

/** How an agent thinks: the architecture contract and the toolkit for writing one. */
export * as Architecture from "./core/Architecture.js"

/** Caps on model calls, tokens, wall clock and cost. */
export * as Budget from "./core/Budget.js"

/** The solver / critic / judge Ensemble: pooled answers, reviews per distinct answer, a hard cap on calls. */
export * as Ensemble from "./rollouts/Ensemble.js"

/** Evaluation over a JSONL dataset: resumable per-problem results, accuracy and accuracy per 100 calls. */
export * as Evaluate from "./rollouts/Evaluate.js"

/** Record / replay of model calls to a JSONL cassette. */
export * as Journal from "./core/Journal.js"

/** Lessons learned from failed attempts, per task key: memory, SQL and SQLite layers. */
export * as LessonStore from "./environment/LessonStore.js"

/** The model service: requests, responses, chunks. */
export * as Model from "./core/Model.js"

/** The errors a model call can fail with. */
export * as ModelError from "./core/ModelError.js"

/** The client of OpenAI-compatible servers (vLLM, OpenAI, llama.cpp, Ollama, SGLang, LM Studio). */
export * as OpenAiCompatible from "./providers/OpenAiCompatible.js"

/** Plan-and-Execute: a planner's steps run in order or in parallel levels, a synthesizer writes the answer. */
export * as PlanAndExecute from "./architectures/PlanAndExecute.js"

/** The ReAct tool loop. */
export * as ReAct from "./architectures/ReAct.js"

/** Reflexion: attempts scored by an evaluator, with a reflector's lessons shown to the next attempt. */
export * as Reflexion from "./architectures/Reflexion.js"

/** Commands in per-task workspaces: allow-list, limits, timeouts that kill the process group, diffs. */
export * as Sandbox from "./environment/Sandbox.js"

/** The scripted test double of `Model`. */
export * as ScriptedModel from "./core/ScriptedModel.js"

/** Self-Refine: a base answer, then critic / refiner rounds until the critique says it is done. */
export * as SelfRefine from "./architectures/SelfRefine.js"

/** The working state of a task between steps: merge, render, SQLite and memory layers. */
export * as StateStore from "./environment/StateStore.js"

/** Supervisor: a coordinator delegates to named worker agents and may forward a worker's answer verbatim. */
export * as Supervisor from "./architectures/Supervisor.js"

/** Tools an agent can call. */
export * as Tool from "./core/Tool.js"

/** ToolVote: parallel Python tool loops through the Sandbox whose final answers vote, with early stop. */
export * as ToolVote from "./rollouts/ToolVote.js"

/** RL trajectories, one JSONL file per task, with step numbering and torn-line repair. */
export * as TrajectoryStore from "./environment/TrajectoryStore.js"

/** The vLLM actor pool (`configs/vllm_actors.yaml`): routing, health, `vllm serve` and the legacy `/generate`. */
export * as Vllm from "./providers/Vllm.js"
