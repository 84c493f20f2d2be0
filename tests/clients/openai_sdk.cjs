// One call of the official OpenAI TypeScript SDK (openai, pinned in package.json) against keel
// serve on 127.0.0.1:PORT serving the bundled tiny-toolcaller (tests/client_sdk_test.cpp).
// Prints "ok CASE: ..." and exits 0, or prints what went wrong and exits 1.
//
//   NODE_PATH=<install>/node_modules node openai_sdk.cjs PORT CASE
'use strict';
const { OpenAI } = require('openai');

const [port, which] = [Number(process.argv[2]), process.argv[3]];
const MODEL = 'tiny-toolcaller';
const client = new OpenAI({
  baseURL: `http://127.0.0.1:${port}/v1`,
  apiKey: 'local',
  maxRetries: 0,
  timeout: 300 * 1000,
});

// The first case of ../shared/fixtures/golden/tiny-toolcaller.session.json in OpenAI form: at
// temperature 0 the model answers it with a Bash call.
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'Bash',
      description: 'Execute a bash command and return output.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', description: 'The bash command to execute' },
          description: { type: 'string', description: 'Description of what this command does' },
        },
        required: ['command'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'Read',
      description: 'Read a file from the filesystem.',
      parameters: {
        type: 'object',
        properties: { file_path: { type: 'string', description: 'Absolute path to the file' } },
        required: ['file_path'],
      },
    },
  },
];
// The same tools in the Responses API's flat form.
const RESPONSES_TOOLS = TOOLS.map((t) => ({ type: 'function', ...t.function }));
const REQUEST = {
  model: MODEL,
  max_tokens: 160,
  temperature: 0,
  tools: TOOLS,
  messages: [
    { role: 'system', content: 'You are a helpful coding assistant. When asked to perform tasks, you MUST use the available tools.' },
    { role: 'user', content: 'What files are in /tmp?' },
  ],
};

const { WEATHER_SCHEMA, checkWeather } = require('./weather_schema.cjs');
const WEATHER_MESSAGES = [{ role: 'user', content: 'What is the weather in Paris? Answer as JSON.' }];

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

const cases = {
  // response_format json_schema through the SDK's parse(): message.parsed is the schema's object.
  async chat_parse_json_schema() {
    const r = await client.chat.completions.parse({
      model: MODEL, max_tokens: 120, temperature: 0, messages: WEATHER_MESSAGES,
      response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: WEATHER_SCHEMA } },
    });
    const message = r.choices[0].message;
    checkWeather(message.parsed, 'parsed');
    check(r.choices[0].finish_reason === 'stop', 'finish_reason stop, got ' + r.choices[0].finish_reason);
    return message.content;
  },

  // The same streamed, through the SDK's stream helper; and json_object.
  async chat_stream_json_schema() {
    const stream = client.chat.completions.stream({
      model: MODEL, max_tokens: 120, temperature: 0, messages: WEATHER_MESSAGES,
      response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: WEATHER_SCHEMA } },
    });
    const r = await stream.finalChatCompletion();
    // The stream helper fills `parsed` only for its zod formats; the content is parsed here.
    checkWeather(JSON.parse(r.choices[0].message.content), 'streamed content');
    const o = await client.chat.completions.create({
      model: MODEL, max_tokens: 60, temperature: 0, messages: WEATHER_MESSAGES, response_format: { type: 'json_object' },
    });
    const content = o.choices[0].message.content;
    if (o.choices[0].finish_reason === 'stop') check(typeof JSON.parse(content) === 'object', 'json_object: ' + content);
    else check(content.trimStart().startsWith('{'), 'json_object starts an object: ' + content);
    return r.choices[0].message.content;
  },

  // Responses API text.format through responses.parse(): output_parsed.
  async responses_parse_json_schema() {
    const r = await client.responses.parse({
      model: MODEL, max_output_tokens: 120, temperature: 0, input: WEATHER_MESSAGES[0].content,
      text: { format: { type: 'json_schema', name: 'weather', strict: true, schema: WEATHER_SCHEMA } },
    });
    checkWeather(r.output_parsed, 'output_parsed');
    check(r.status === 'completed', 'status completed, got ' + r.status);
    return r.output_text;
  },

  // A schema keel cannot honour exactly is a 400 naming the keyword, in OpenAI's error shape.
  async chat_json_schema_refused() {
    let error = null;
    try {
      await client.chat.completions.create({
        model: MODEL, max_tokens: 20, messages: WEATHER_MESSAGES,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
      });
    } catch (e) {
      error = e;
    }
    check(error instanceof OpenAI.BadRequestError, 'a BadRequestError, got ' + error);
    check(error.param === 'response_format.json_schema.schema.pattern', 'param names the keyword: ' + error.param);
    return error.message;
  },

  async chat_create() {
    const r = await client.chat.completions.create(REQUEST);
    check(r.object === 'chat.completion' && Array.isArray(r.choices) && r.choices.length === 1, 'completion: ' + JSON.stringify(r));
    const choice = r.choices[0];
    const calls = choice.message.tool_calls || [];
    check(calls.length >= 1, 'tool_calls: ' + JSON.stringify(choice.message));
    const call = calls[0];
    check(call.type === 'function' && call.function.name === 'Bash' && typeof call.id === 'string', 'Bash call: ' + JSON.stringify(call));
    const args = JSON.parse(call.function.arguments);
    check(typeof args.command === 'string', 'arguments parse to {command}: ' + call.function.arguments);
    check(choice.finish_reason === 'tool_calls', 'finish_reason tool_calls, got ' + choice.finish_reason);
    check(r.usage && r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, 'usage: ' + JSON.stringify(r.usage));
    return `Bash ${call.function.arguments}, usage ${JSON.stringify(r.usage)}`;
  },

  async chat_create_stream() {
    const stream = await client.chat.completions.create({ ...REQUEST, stream: true, stream_options: { include_usage: true } });
    const calls = [];
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      check(chunk.object === 'chat.completion.chunk', 'chunk object: ' + JSON.stringify(chunk));
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.finish_reason) finish = choice.finish_reason;
        for (const d of choice.delta.tool_calls || []) {
          if (!calls[d.index]) calls[d.index] = { id: d.id, name: '', arguments: '' };
          if (d.function && d.function.name) calls[d.index].name += d.function.name;
          if (d.function && d.function.arguments) calls[d.index].arguments += d.function.arguments;
        }
      }
    }
    check(calls.length >= 1 && calls[0].name === 'Bash' && calls[0].id, 'a Bash call: ' + JSON.stringify(calls));
    const args = JSON.parse(calls[0].arguments);
    check(typeof args.command === 'string', 'arguments parse to {command}: ' + calls[0].arguments);
    check(finish === 'tool_calls', 'finish_reason tool_calls, got ' + finish);
    check(usage && usage.prompt_tokens > 0, 'usage chunk: ' + JSON.stringify(usage));
    return `${chunks} chunks, Bash ${calls[0].arguments}`;
  },

  // The SDK's own stream accumulator (chat.completions.stream), which checks chunk order strictly.
  async chat_stream_helper() {
    const stream = client.chat.completions.stream(REQUEST);
    const r = await stream.finalChatCompletion();
    const call = (r.choices[0].message.tool_calls || [])[0];
    check(call && call.function.name === 'Bash', 'Bash call: ' + JSON.stringify(r.choices[0].message));
    JSON.parse(call.function.arguments);
    return `Bash ${call.function.arguments}`;
  },

  // A named tool the model would not pick (it calls Bash here): keel writes the call's start for
  // it, and the SDK gets a Read call with parsed arguments.
  async chat_named_tool() {
    const r = await client.chat.completions.create({ ...REQUEST, tool_choice: { type: 'function', function: { name: 'Read' } } });
    const choice = r.choices[0];
    const call = (choice.message.tool_calls || [])[0];
    check(call && call.function.name === 'Read', 'a Read call: ' + JSON.stringify(choice.message));
    const args = JSON.parse(call.function.arguments);
    check(typeof args.file_path === 'string', 'arguments parse to {file_path}: ' + call.function.arguments);
    check(choice.finish_reason === 'tool_calls', 'finish_reason tool_calls, got ' + choice.finish_reason);
    return `Read ${call.function.arguments}`;
  },

  // The Responses API (client.responses): the same conversation as input items; the model answers
  // with a Bash function_call; its output goes back as a function_call_output item, and the
  // answer after it is a completed response with usage.
  async responses_create() {
    const request = {
      model: MODEL,
      max_output_tokens: 160,
      temperature: 0,
      instructions: REQUEST.messages[0].content,
      input: [{ role: 'user', content: [{ type: 'input_text', text: REQUEST.messages[1].content }] }],
      tools: RESPONSES_TOOLS,
    };
    const r = await client.responses.create(request);
    check(r.object === 'response' && r.status === 'completed' && r.id.startsWith('resp_'), 'response: ' + JSON.stringify(r));
    const call = r.output.find((item) => item.type === 'function_call');
    check(call && call.name === 'Bash' && call.call_id && call.id, 'a Bash function_call: ' + JSON.stringify(r.output));
    check(typeof JSON.parse(call.arguments).command === 'string', 'arguments parse to {command}: ' + call.arguments);
    check(r.usage && r.usage.input_tokens > 0 && r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens,
          'usage: ' + JSON.stringify(r.usage));
    const second = await client.responses.create({
      ...request,
      input: [...request.input, ...r.output, { type: 'function_call_output', call_id: call.call_id, output: 'alpha.txt\nbeta.py' }],
    });
    check(second.status === 'completed' || second.status === 'incomplete', 'second response: ' + JSON.stringify(second));
    check(second.usage.input_tokens_details.cached_tokens > 0, 'the second request reads the first from the cache: ' + JSON.stringify(second.usage));
    return `Bash ${call.arguments}, then ${JSON.stringify(second.output_text.slice(0, 60))}, usage ${JSON.stringify(second.usage)}`;
  },

  // client.responses.stream: the SDK's accumulator checks the event order (an item added before
  // its deltas, sequence numbers) and builds the final response from the events.
  async responses_stream() {
    const stream = client.responses.stream({
      model: MODEL,
      max_output_tokens: 160,
      temperature: 0,
      instructions: REQUEST.messages[0].content,
      input: REQUEST.messages[1].content,
      tools: RESPONSES_TOOLS,
    });
    const types = [];
    let argumentsDelta = '';
    stream.on('event', (e) => types.push(e.type));
    stream.on('response.function_call_arguments.delta', (e) => { argumentsDelta += e.delta; });
    const r = await stream.finalResponse();
    const call = r.output.find((item) => item.type === 'function_call');
    check(call && call.name === 'Bash', 'a Bash function_call: ' + JSON.stringify(r.output));
    check(argumentsDelta === call.arguments, `the deltas spell the arguments: ${argumentsDelta} vs ${call.arguments}`);
    check(types[0] === 'response.created' && types[types.length - 1] === 'response.completed', 'event order: ' + types.join(' '));
    for (const t of ['response.output_item.added', 'response.function_call_arguments.done', 'response.output_item.done'])
      check(types.includes(t), `${t} in ${types.join(' ')}`);
    return `${types.length} events, Bash ${call.arguments}`;
  },

  // Errors in OpenAI's shape: an unsupported tool type is a BadRequestError naming the field.
  async responses_errors() {
    let error = null;
    try {
      await client.responses.create({ model: MODEL, input: 'hi', tools: [{ type: 'web_search' }] });
    } catch (e) {
      error = e;
    }
    check(error instanceof OpenAI.BadRequestError, 'a BadRequestError, got ' + error);
    check(error.param === 'tools.0.type' && /web_search/.test(error.message), 'param and message: ' + JSON.stringify(error.error));
    let missing = null;
    try {
      await client.responses.retrieve('resp_nothing');
    } catch (e) {
      missing = e;
    }
    check(missing instanceof OpenAI.NotFoundError, 'retrieve is a NotFoundError, got ' + missing);
    return `${error.status} ${error.param}; retrieve ${missing.status}`;
  },

  // logprobs + top_logprobs, streamed and not: the same seed gives the same tokens and numbers;
  // one entry per output token, alternatives most likely first, probabilities that can be.
  async chat_logprobs() {
    const request = {
      model: MODEL, max_tokens: 16, temperature: 0.8, seed: 7, messages: WEATHER_MESSAGES, logprobs: true, top_logprobs: 5,
    };
    const r = await client.chat.completions.create(request);
    const choice = r.choices[0];
    const entries = choice.logprobs.content;
    check(choice.finish_reason === 'length', 'finish_reason length, got ' + choice.finish_reason);
    check(entries.length === r.usage.completion_tokens, `${entries.length} entries for ${r.usage.completion_tokens} tokens`);
    for (const e of entries) {
      check(e.logprob <= 0 && e.top_logprobs.length === 5, 'entry: ' + JSON.stringify(e));
      let mass = 0;
      for (let i = 0; i < 5; ++i) {
        const alt = e.top_logprobs[i];
        mass += Math.exp(alt.logprob);
        if (i > 0) check(alt.logprob <= e.top_logprobs[i - 1].logprob, 'alternatives sorted: ' + JSON.stringify(e));
        if (alt.token === e.token) check(Math.abs(alt.logprob - e.logprob) < 1e-12, 'the token among them: ' + JSON.stringify(e));
      }
      check(mass <= 1 + 1e-9, 'alternatives sum to at most 1: ' + mass);
      if (!e.top_logprobs.some((a) => a.token === e.token))
        check(e.logprob <= e.top_logprobs[4].logprob, 'a token not listed is less likely than those listed: ' + JSON.stringify(e));
    }
    const text = Buffer.concat(entries.map((e) => Buffer.from(e.bytes))).toString('utf8');
    check(text.includes(choice.message.content.trim()), `tokens ${JSON.stringify(text)} hold the content ${JSON.stringify(choice.message.content)}`);

    const streamed = [];
    let content = '';
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
      for (const c of chunk.choices) {
        if (c.logprobs && c.logprobs.content) streamed.push(...c.logprobs.content);
        if (c.delta.content) content += c.delta.content;
      }
    }
    check(content === choice.message.content, `streamed content ${JSON.stringify(content)}`);
    check(JSON.stringify(streamed) === JSON.stringify(entries), 'streamed logprobs equal the whole answer\'s');
    return `${entries.length} tokens, first ${JSON.stringify(entries[0].token)} ${entries[0].logprob.toFixed(3)}`;
  },

  // n = 3 with a seed: choice i is what a single request with seed + i answers.
  async chat_n_choices() {
    const request = { model: MODEL, max_tokens: 12, temperature: 1, messages: WEATHER_MESSAGES };
    const r = await client.chat.completions.create({ ...request, n: 3, seed: 11 });
    check(r.choices.length === 3, '3 choices, got ' + r.choices.length);
    let tokens = 0;
    for (let i = 0; i < 3; ++i) {
      check(r.choices[i].index === i, 'index ' + i);
      const single = await client.chat.completions.create({ ...request, seed: 11 + i });
      check(single.choices[0].message.content === r.choices[i].message.content,
        `choice ${i} ${JSON.stringify(r.choices[i].message.content)} vs seed ${11 + i} ${JSON.stringify(single.choices[0].message.content)}`);
      tokens += single.usage.completion_tokens;
    }
    check(r.usage.completion_tokens === tokens, `usage counts every choice: ${r.usage.completion_tokens} vs ${tokens}`);
    const distinct = new Set(r.choices.map((c) => c.message.content)).size;
    return `${distinct} distinct of 3: ${r.choices.map((c) => JSON.stringify(c.message.content)).join(' | ')}`;
  },

  async models_list() {
    const ids = [];
    for await (const m of client.models.list()) {
      check(m.object === 'model' && typeof m.id === 'string', 'model entry: ' + JSON.stringify(m));
      ids.push(m.id);
    }
    check(ids.includes(MODEL), `${MODEL} listed: ${JSON.stringify(ids)}`);
    return ids.join(',');
  },

  async models_retrieve() {
    const m = await client.models.retrieve(MODEL);
    check(m.object === 'model' && m.id === MODEL, 'model: ' + JSON.stringify(m));
    let missing = null;
    try {
      await client.models.retrieve('no-such-model');
    } catch (e) {
      missing = e;
    }
    check(missing instanceof OpenAI.NotFoundError, 'an unknown model is a NotFoundError, got ' + missing);
    return JSON.stringify(m);
  },
};

(async () => {
  if (!cases[which]) throw new Error(`unknown case ${which}; cases: ${Object.keys(cases).join(' ')}`);
  const detail = await cases[which]();
  console.log(`ok ${which}: ${detail}`);
})().catch((e) => {
  console.log(`FAILED ${which}: ${e && e.stack ? e.stack : e}`);
  if (e && e.status) console.log(`HTTP ${e.status} ${JSON.stringify(e.error)}`);
  process.exit(1);
});
