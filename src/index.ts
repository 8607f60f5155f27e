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

/** Context that never overflows: the compaction policy and strategies the runtime applies before model calls. */
export * as Compaction from "./core/Compaction.js"

/** Text-embedding models: one vector per text, checked and batched (what semantic recall embeds with). */
export * as EmbeddingModel from "./core/EmbeddingModel.js"

/** The deterministic test double of `EmbeddingModel`: hashed bags of words. */
export * as HashedEmbeddingModel from "./core/HashedEmbeddingModel.js"

/** Guardrails: input, output and tool checks that pass, trip with a reason, or rewrite (a redactor). */
export * as Guardrail from "./core/Guardrail.js"

/** People in the loop: tool calls that wait for a person's approval, and their decisions. */
export * as HumanLoop from "./core/HumanLoop.js"

/** Caps on model calls, tokens, wall clock and cost. */
export * as Budget from "./core/Budget.js"

/** Record / replay of model calls to a JSONL cassette. */
export * as Journal from "./core/Journal.js"

/** Lessons learned from failed attempts, per task key (Reflexion's memory): memory and SQL layers. */
export * as LessonStore from "./environment/LessonStore.js"

/** The model service: requests, responses, chunks. */
export * as Model from "./core/Model.js"

/** The errors a model call can fail with. */
export * as ModelError from "./core/ModelError.js"

/** A remote A2A 1.0 agent as a valet agent. */
export * as A2A from "./providers/A2A.js"

/** The client of OpenAI-compatible servers (vLLM, OpenAI, llama.cpp, Ollama, SGLang, LM Studio). */
export * as OpenAiCompatible from "./providers/OpenAiCompatible.js"

/** The scripted test double of `Model`. */
export * as ScriptedModel from "./core/ScriptedModel.js"

/** Conversations that persist: threads on memory, SQLite or PostgreSQL, and turns on them. */
export * as Threads from "./core/Threads.js"

/** Tools an agent can call. */
export * as Tool from "./core/Tool.js"

/** The files an agent works on (DeepAgent's): in memory, a directory, or a sandbox's workspace; the file tools over them. */
export * as Workspace from "./environment/Workspace.js"

/** Every architecture that runs on a model alone: ActorCritic, Blackboard, DeepAgent, Ensemble, MultiAgentDebate, PlanAndExecute, ReAct, ReWOO, Reflexion, Router, SelfRefine, Supervisor, Swarm, TreeOfThoughts. */
export * from "./architectures/all.js"

/** The catalog of the architectures, by name (what `valet.yaml` and the CLI read). */
export * as Catalog from "./architectures/Catalog.js"
