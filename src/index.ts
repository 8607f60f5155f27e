/**
 * valet: agent architectures as Effect programs that stream typed events.
 *
 * The root entry holds what running agents needs: the core (agents, architectures' toolkit, models, tools,
 * budgets, events, record / replay), the architectures, the OpenAI-compatible client and the solver / critic /
 * judge ensemble. The sandbox, the stores, the vLLM pool, the RL and evaluation loops and the effect/ai bridge are
 * subpath exports (`valet/Sandbox`, `valet/StateStore`, `valet/Vllm`, `valet/ToolVote`, `valet/EffectAi`, …), so an
 * app that only runs agents does not load them. Every module is also its own subpath (`valet/Agent`).
 *
 * @since 0.1.0
 */

/** Actor-Critic: an actor agent answers and revises, a critic agent scores, until approval or the last round. */
export * as ActorCritic from "./architectures/ActorCritic.js"

/** Agents: definitions, runs, streams and sub-agents. */
export * as Agent from "./core/Agent.js"

/** The errors an agent run can fail with. */
export * as AgentError from "./core/AgentError.js"

/** The events a run streams, and helpers to filter and rebuild them. */
export * as AgentEvent from "./core/AgentEvent.js"

/** The agents a server offers, by name (for `valet serve`, the OpenAI facade and `valet mcp`). */
export * as Agents from "./serve/Agents.js"

/** How an agent thinks: the architecture contract and the toolkit for writing one. */
export * as Architecture from "./core/Architecture.js"

/** Blackboard: agents contribute to a shared board, picked by a coordinator or in turn; a decider answers. */
export * as Blackboard from "./architectures/Blackboard.js"

/** Caps on model calls, tokens, wall clock and cost. */
export * as Budget from "./core/Budget.js"

/** The solver / critic / judge Ensemble: pooled answers, reviews per distinct answer, a hard cap on calls. */
export * as Ensemble from "./architectures/Ensemble.js"

/** Record / replay of model calls to a JSONL cassette. */
export * as Journal from "./core/Journal.js"

/** Lessons learned from failed attempts, per task key (Reflexion's memory): memory and SQL layers. */
export * as LessonStore from "./environment/LessonStore.js"

/** The model service: requests, responses, chunks. */
export * as Model from "./core/Model.js"

/** The errors a model call can fail with. */
export * as ModelError from "./core/ModelError.js"

/** Multi-agent debate: rounds of answers that read each other, until they agree; then a judge or a vote. */
export * as MultiAgentDebate from "./architectures/MultiAgentDebate.js"

/** The client of OpenAI-compatible servers (vLLM, OpenAI, llama.cpp, Ollama, SGLang, LM Studio). */
export * as OpenAiCompatible from "./providers/OpenAiCompatible.js"

/** Plan-and-Execute: a planner's steps run in order or in parallel levels, a synthesizer writes the answer. */
export * as PlanAndExecute from "./architectures/PlanAndExecute.js"

/** The ReAct tool loop. */
export * as ReAct from "./architectures/ReAct.js"

/** ReWOO: the whole tool plan in one call, the tools as a DAG, one solver call. */
export * as ReWOO from "./architectures/ReWOO.js"

/** Reflexion: attempts scored by an evaluator, with a reflector's lessons shown to the next attempt. */
export * as Reflexion from "./architectures/Reflexion.js"

/** The scripted test double of `Model`. */
export * as ScriptedModel from "./core/ScriptedModel.js"

/** Router: one classifier call hands the task to the route (an agent) that fits, with a fallback. */
export * as Router from "./architectures/Router.js"

/** Self-Refine: a base answer, then critic / refiner rounds until the critique says it is done. */
export * as SelfRefine from "./architectures/SelfRefine.js"

/** Supervisor: a coordinator delegates to named worker agents and may forward a worker's answer verbatim. */
export * as Supervisor from "./architectures/Supervisor.js"

/** Swarm: agents hand the conversation to each other; a handoff ends the agent's turn. */
export * as Swarm from "./architectures/Swarm.js"

/** Tools an agent can call. */
export * as Tool from "./core/Tool.js"

/** Tree of Thoughts: a beam search over chains of thoughts, proposed and scored level by level. */
export * as TreeOfThoughts from "./architectures/TreeOfThoughts.js"
