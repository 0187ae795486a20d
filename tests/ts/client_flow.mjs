// End-to-end client flow for acp-server, driven by the official ACP TypeScript SDK.
//
// Environment:
//   ACP_SERVER_ARGV  JSON array: the command and arguments that start the agent.
//   ACP_TEST_CWD     absolute directory sent as `cwd` in session/new.
//   ACP_FLOW_TIMEOUT_MS  optional watchdog for the whole flow (default 45000).
//
// Flow: initialize -> session/new -> prompt "hello" -> a slow prompt that is
// cancelled with session/cancel after its first streamed chunk -> a third
// prompt that must end normally. On success one JSON summary line goes to
// stdout and the exit code is 0; on any failure the reason goes to stderr and
// the exit code is 1 (the summary is still printed when the flow got that far).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { isAbsolute } from "node:path";
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const CLIENT_INFO = { name: "acp-server-e2e", title: "acp-server e2e flow", version: "0.0.0" };
// Update kinds that belong to a prompt turn and must precede its response (ACP §11).
const TURN_UPDATE_KINDS = new Set([
  "user_message_chunk",
  "agent_message_chunk",
  "agent_thought_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
]);
const EXIT_GRACE_MS = 10_000;

function fail(reason) {
  throw new Error(reason);
}

function readEnv() {
  const rawArgv = process.env.ACP_SERVER_ARGV;
  if (!rawArgv) fail("ACP_SERVER_ARGV is not set");
  let argv;
  try {
    argv = JSON.parse(rawArgv);
  } catch (error) {
    fail(`ACP_SERVER_ARGV is not JSON: ${error.message}`);
  }
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string")) {
    fail("ACP_SERVER_ARGV must be a non-empty JSON array of strings");
  }
  const cwd = process.env.ACP_TEST_CWD;
  if (!cwd || !isAbsolute(cwd)) fail("ACP_TEST_CWD must be an absolute directory");
  const timeoutMs = Number(process.env.ACP_FLOW_TIMEOUT_MS ?? 45_000);
  return { argv, cwd, timeoutMs };
}

// Passes the server's stdout through unchanged while checking that every line
// is a JSON-RPC 2.0 object (the SDK would otherwise answer junk silently).
function frameChecker(frameErrors) {
  const decoder = new TextDecoder();
  let pending = "";
  const check = (line) => {
    if (line.trim() === "") {
      frameErrors.push("blank line on stdout");
      return;
    }
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      frameErrors.push(`non-JSON line on stdout: ${line.slice(0, 200)}`);
      return;
    }
    if (message === null || typeof message !== "object" || Array.isArray(message)) {
      frameErrors.push(`stdout line is not a JSON object: ${line.slice(0, 200)}`);
    } else if (message.jsonrpc !== "2.0") {
      frameErrors.push(`frame without "jsonrpc":"2.0": ${line.slice(0, 200)}`);
    }
  };
  return new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      let newline;
      while ((newline = pending.indexOf("\n")) >= 0) {
        check(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
      }
      controller.enqueue(chunk);
    },
    flush() {
      pending += decoder.decode();
      if (pending !== "") frameErrors.push(`unterminated last line on stdout: ${pending.slice(0, 200)}`);
    },
  });
}

function spawnServer(argv) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", (error) => resolve({ code: null, signal: null, error }));
  });
  // Writing to a server that already died must surface as a flow failure, not a crash.
  child.stdin.on("error", () => {});
  return { child, exited };
}

function textOf(update) {
  return update.content?.type === "text" ? update.content.text : "";
}

// Reads one prompt turn from the ActiveSession queue until its stop message.
// `onChunk(count)` runs after each agent_message_chunk, e.g. to cancel the turn.
async function collectTurn(session, onChunk) {
  const turn = { text: "", chunks: 0, kinds: [], messageIds: new Set(), thought: "" };
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") {
      turn.stopReason = message.stopReason;
      return turn;
    }
    const { update } = message;
    turn.kinds.push(update.sessionUpdate);
    if (update.sessionUpdate === "agent_thought_chunk") turn.thought += textOf(update);
    if (update.sessionUpdate !== "agent_message_chunk") continue;
    turn.chunks += 1;
    turn.text += textOf(update);
    if (update.messageId != null) turn.messageIds.add(update.messageId);
    if (onChunk) await onChunk(turn.chunks);
  }
}

async function runFlow(stream, cwd, state) {
  const app = client({ name: CLIENT_INFO.name })
    .onRequest(methods.client.session.requestPermission, () => {
      state.permissionRequests += 1;
      return { outcome: { outcome: "cancelled" } };
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      state.updates += 1;
      if (state.sessionId !== undefined && params.sessionId !== state.sessionId) {
        state.problems.push(`session/update for unknown session ${JSON.stringify(params.sessionId)}`);
      }
      const kind = params.update.sessionUpdate;
      if (!state.inTurn && TURN_UPDATE_KINDS.has(kind)) {
        state.problems.push(`${kind} update arrived outside a prompt turn (after the prompt response)`);
      }
    });

  return app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: CLIENT_INFO,
    });
    if (init.protocolVersion !== 1) {
      fail(`initialize answered protocolVersion ${JSON.stringify(init.protocolVersion)}, expected 1`);
    }

    const session = await ctx.buildSession({ cwd, mcpServers: [] }).start();
    state.sessionId = session.sessionId;
    if (typeof session.sessionId !== "string" || session.sessionId === "") {
      fail(`session/new returned no sessionId: ${JSON.stringify(session.newSessionResponse)}`);
    }

    const prompt = (text) => {
      state.inTurn = true;
      const response = session.prompt(text);
      response.then(
        () => (state.inTurn = false),
        () => (state.inTurn = false),
      );
      return response;
    };

    try {
      // Turn 1: a plain reply.
      prompt("hello");
      const first = await collectTurn(session);

      // Turn 2: slow reply, cancelled as soon as the first chunk shows up.
      let cancelledAt;
      let chunksBeforeCancel = 0;
      prompt("Please answer slowly.");
      const second = await collectTurn(session, async (count) => {
        if (cancelledAt !== undefined) return;
        chunksBeforeCancel = count;
        cancelledAt = performance.now();
        await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
      });
      const cancelLatencyMs =
        cancelledAt === undefined ? null : Math.round(performance.now() - cancelledAt);

      // Turn 3: the session must still work after a cancel.
      prompt("Are you still there?");
      const third = await collectTurn(session);

      return {
        protocolVersion: init.protocolVersion,
        agentInfo: init.agentInfo ?? null,
        sessionId: session.sessionId,
        firstText: first.text,
        firstChunks: first.chunks,
        firstStop: first.stopReason,
        firstMessageIds: [...first.messageIds],
        cancelStop: second.stopReason,
        cancelText: second.text,
        chunksBeforeCancel,
        cancelChunks: second.chunks,
        cancelSent: cancelledAt !== undefined,
        cancelLatencyMs,
        thirdText: third.text,
        thirdChunks: third.chunks,
        thirdStop: third.stopReason,
        thirdMessageIds: [...third.messageIds],
        updateKinds: [...new Set([...first.kinds, ...second.kinds, ...third.kinds])].sort(),
      };
    } finally {
      session.dispose();
    }
  });
}

function checkSummary(summary, problems) {
  if (summary.firstStop !== "end_turn") problems.push(`first prompt stopped with ${summary.firstStop}, expected end_turn`);
  if (summary.firstChunks < 1) problems.push("first prompt streamed no agent_message_chunk");
  if (!summary.cancelSent) problems.push("slow prompt streamed no chunk, so session/cancel was never sent");
  if (summary.cancelStop !== "cancelled") problems.push(`cancelled prompt stopped with ${summary.cancelStop}, expected cancelled`);
  if (summary.thirdStop !== "end_turn") problems.push(`third prompt stopped with ${summary.thirdStop}, expected end_turn`);
  if (summary.thirdChunks < 1) problems.push("third prompt streamed no agent_message_chunk");
}

async function main() {
  const { argv, cwd, timeoutMs } = readEnv();
  const { child, exited } = spawnServer(argv);
  const state = { problems: [], frameErrors: [], permissionRequests: 0, updates: 0, inTurn: false };

  let serverExit;
  void exited.then((result) => {
    serverExit = result;
  });
  let watchdog;
  const timedOut = new Promise((_, reject) => {
    watchdog = setTimeout(() => reject(new Error(`flow did not finish within ${timeoutMs} ms`)), timeoutMs);
  });

  const input = Readable.toWeb(child.stdout).pipeThrough(frameChecker(state.frameErrors));
  const stream = ndJsonStream(Writable.toWeb(child.stdin), input);

  let summary;
  let flowError;
  try {
    summary = await Promise.race([runFlow(stream, cwd, state), timedOut]);
  } catch (error) {
    flowError = error;
  }
  // Whether the server had already gone when the flow broke explains most failures;
  // its stdout closes a moment before its exit status is known, so wait briefly.
  if (flowError !== undefined) {
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 500))]);
  }
  const diedEarly = serverExit !== undefined;

  // Shutdown per ACP §1: close the agent's stdin and wait for it to exit.
  child.stdin.end();
  let exitTimer;
  const exitDeadline = new Promise((resolve) => {
    exitTimer = setTimeout(() => resolve(null), EXIT_GRACE_MS);
  });
  let exit = await Promise.race([exited, exitDeadline]);
  clearTimeout(exitTimer);
  clearTimeout(watchdog);
  if (exit === null) {
    state.problems.push(`server did not exit within ${EXIT_GRACE_MS} ms after stdin was closed`);
    child.kill("SIGKILL");
    exit = await exited;
  }

  if (flowError !== undefined) {
    const how = exit.error
      ? `could not start server: ${exit.error.message}`
      : `server ${diedEarly ? "exited early" : "exited after stdin closed"}: code=${exit.code} signal=${exit.signal}`;
    state.problems.unshift(`flow failed: ${flowError?.message ?? flowError} (${how})`);
  }

  if (summary) {
    checkSummary(summary, state.problems);
    state.problems.push(...state.frameErrors);
    if (state.permissionRequests > 0) {
      state.problems.push(`unexpected session/request_permission (${state.permissionRequests})`);
    }
    Object.assign(summary, {
      updates: state.updates,
      permissionRequests: state.permissionRequests,
      exitCode: exit.code,
      exitSignal: exit.signal,
      problems: state.problems,
    });
    process.stdout.write(JSON.stringify(summary) + "\n");
  } else {
    state.problems.push(...state.frameErrors);
  }

  if (state.problems.length > 0) {
    for (const problem of state.problems) process.stderr.write(`client_flow: ${problem}\n`);
    process.exitCode = 1;
  }
}

main().then(
  // Exit explicitly: a half-closed SDK connection must not keep node alive.
  () => process.exit(),
  (error) => {
    process.stderr.write(`client_flow: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
