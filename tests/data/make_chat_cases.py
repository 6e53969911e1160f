#!/usr/bin/env python3
"""Writes chat_cases.json: chat templates rendered by Python jinja2 configured as HuggingFace
transformers' apply_chat_template configures it (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, raise_exception / strftime_now globals, json.dumps-based tojson,
{% generation %} rendered through). tests/test_chat_template.c compares ignis' renderer against it.

Run: python3 tests/data/make_chat_cases.py  (needs jinja2 >= 3.1)
"""
import json
import os
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationThrough(Extension):
    # transformers' AssistantTracker, minus the index bookkeeping: {% generation %} renders its body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class TemplateError(Exception):
    pass


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationThrough, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()

# ---------------------------------------------------------------------------------- templates

MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)

LLAMA31_LIKE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions." }}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

QWEN25_TOOLS = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

GEMMA_LIKE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

NAMESPACE_LAST = """{%- set ns = namespace(found=false, count=0, sys='') -%}
{%- for m in messages -%}
  {%- if m.role == 'system' -%}{%- set ns.found = true -%}{%- set ns.sys = m.content -%}{%- endif -%}
  {%- set ns.count = ns.count + 1 -%}
{%- endfor -%}
{%- if not ns.found %}<<SYS>>default<</SYS>>
{% else %}<<SYS>>{{ ns.sys }}<</SYS>>
{% endif %}
{%- for m in messages if m.role != 'system' %}
[{{ loop.index }}/{{ loop.length }}|{{ loop.revindex }}|{{ loop.revindex0 }}] {{ m.role|upper }}: {{ m.content }}{% if loop.last %} (last of {{ ns.count }}){% endif %}
{%- if loop.previtem is defined %} prev={{ loop.previtem.role }}{% endif %}
{%- if loop.nextitem is defined %} next={{ loop.nextitem.role }}{% endif %}
{% endfor -%}
{%- if add_generation_prompt %}ASSISTANT:{% endif %}"""

WHITESPACE = """Header
    {% if true %}
        indented text
    {% endif %}
  {#- comment that strips left #}
  {# plain comment #}
  {%+ if true %}kept-lstrip{% endif %}
{% for i in range(3) -%}
    [{{ i }}]
{%- endfor %}
{{ 'a' }}   {{- 'b' -}}   {{ 'c' }}
{% raw %}{{ not rendered }} {% if %}{% endraw %}
	{% if true %}tab-indented{% endif %}
{%- if false %}x{% else %}
else-branch
{%- endif %}
{% if true +%}
plus-kept
{% endif %}
end
"""

FILTERS = """{{ '  padded  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ messages|length }}|{{ 'MiXeD'|lower }}|{{ 'MiXeD'|upper }}
{{ 'hello world'|capitalize }}|{{ 'hello world'|title }}|{{ 'a-b-c'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) }}
{{ [1, 2, 3]|join(', ') }}|{{ ['x', 'y']|join }}|{{ messages|map(attribute='role')|join(',') }}
{{ undefined_thing|default('dflt') }}|{{ ''|default('empty', true) }}|{{ none|default('no') }}|{{ undefined_thing|d('d2') }}
{{ [4, 5, 6]|first }}|{{ [4, 5, 6]|last }}|{{ 'abc'|first }}|{{ 'abc'|last }}|{{ [3, 1, 2]|sort|list }}|{{ ['b', 'A', 'c']|sort }}
{{ {'k1': 1, 'k2': [1, 2]}|items|list }}|{{ 42|string + '!' }}|{{ '12'|int + 1 }}|{{ '3.7'|int }}|{{ 'x'|int }}|{{ '2.5'|float }}
{{ 'abc'|list }}|{{ [1, 1, 2, 'a', 'A']|unique|list }}|{{ [1, 2, 3]|reverse|list }}|{{ 'abc'|reverse }}|{{ -3|abs }}
{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(' / ') }}
{{ messages|rejectattr('role', 'equalto', 'user')|list|length }}|{{ messages|selectattr('name')|list|length }}
{{ messages|selectattr('name', 'defined')|map(attribute='name')|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}
{{ "line1\\nline2\\n\\nline4"|indent(2) }}|{{ "l1\\nl2"|indent(4, true) }}|{{ "l1\\n\\nl3"|indent(2, blank=true) }}
{{ [1, 2, 3]|sum }}|{{ [3, 9, 2]|max }}|{{ [3, 9, 2]|min }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ ['a','b']|map('upper')|list }}
{{ {'b': 1, 'a': 2}|dictsort }}|{{ '<a href="x">&'|e }}|{{ 'one two  three'|wordcount }}|{{ messages[0]|attr('role') }}
{{ tools|tojson }}
{{ tools|tojson(indent=2) }}
{{ {'z': 1, 'a': [1.5, 2.0, none, true, 'é"\\\\\\n']}|tojson(sort_keys=true) }}
{{ {'a': 'ü'}|tojson(ensure_ascii=true) }}|{{ {'a': 1, 'b': 2}|tojson(separators=(',', ':')) }}|{{ [[]]|tojson(indent=2) }}|{{ {}|tojson }}
"""

EXPRESSIONS = """{{ 'abcdef'[1:] }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[1:4] }}|{{ 'abcdef'[-2:] }}|{{ 'abcdef'[:-2] }}|{{ 'abcdef'[::2] }}|{{ [1,2,3,4][1::2] }}|{{ 'héllo'[1] }}|{{ 'héllo'[-4:-1] }}
{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 10 / 5 }}|{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.0e-5 }}|{{ 123456789.0 * 1000 }}|{{ 2 ** -1 }}
{{ 'a' ~ 1 ~ none ~ true }}|{{ 'x' * 3 }}|{{ [1] + [2] }}|{{ 'ab' in 'cabd' }}|{{ 3 not in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 1 == 1.0 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}
{{ 'yes' if messages else 'no' }}|{{ 'yes' if not messages else 'no' }}|{{ ('t' if false) ~ '|' }}|{{ none is none }}|{{ 1 is number }}|{{ 'x' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 'x' is sequence }}|{{ 1 is integer }}|{{ 1.0 is float }}
{{ nope is defined }}|{{ nope is undefined }}|{{ messages[0].nope is defined }}|{{ messages[99] is defined }}|{{ 4 is divisibleby 2 }}|{{ 3 is odd }}|{{ true is true }}|{{ 1 is eq 1 }}|{{ 5 is gt(3) }}|{{ 'ab' is lower }}|{{ 2 is in [1, 2] }}
{{ [1, 'two', none, true, 1.5, {'k': "it's"}] }}|{{ {'a': [1, 2]} }}|{{ none }}|{{ true }}|{{ "q'uote" }}|{{ 'tab\\there' }}|{{ ['multi\\nline', 'a"b'] }}
{{ 'a,b,,c'.split(',') }}|{{ ' a  b c '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  s  '.strip() }}|{{ 'xxsxx'.lstrip('x') }}|{{ 'xxsxx'.rstrip('x') }}|{{ '\\n\\nx\\n'.strip('\\n') }}
{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('lo', 'zz')) }}|{{ 'Hello'.lower() }}|{{ 'Hello'.upper() }}|{{ 'a-b'.replace('-', '_') }}|{{ '{} and {}'.format('x', 2) }}|{{ '{name}!'.format(name='hi') }}|{{ 'hello'.find('l') }}|{{ 'hello'.count('l') }}|{{ ','.join(['a', 'b']) }}
{{ {'a': 1}.get('a') }}|{{ {'a': 1}.get('b') }}|{{ {'a': 1}.get('b', 'dflt') }}|{{ {'a': 1, 'b': 2}.keys()|list }}|{{ {'a': 1, 'b': 2}.values()|list }}|{{ {'a': 1, 'b': 2}.items()|list }}
{%- for k, v in {'x': 1, 'y': 2}.items() %} {{ k }}={{ v }}{% endfor %}
{%- for a, b in [[1, 2], [3, 4]] %} {{ a + b }}{% endfor %}
{%- set p, q = 'P', 'Q' %} {{ p }}{{ q }}
{%- set lst = [1, 2, 3] %} {{ lst[-1] }} {{ lst[0] }} {{ lst|length }}
{%- set d = {'n': {'m': 'deep'}} %} {{ d.n.m }} {{ d['n']['m'] }} {{ messages.0.role }}
{{ 1 < 2 < 3 }}|{{ 3 > 2 > 1 }}|{{ 1 < 3 < 2 }}|{{ 'ÉtÉ ñ Straße δ Жук'|lower }}|{{ 'été ñ δ жук ÿ'|upper }}|{{ 'über'|capitalize }}
{{ "adjacent" " strings" }}|{{ 'esc\\x41\\u00e9\\\\' }}|{{ 1_000 }}|{{ not true or true and false }}|{{ -2 ** 2 }}|{{ (1, 2) }}
"""

LOOPS = """{%- for m in messages %}
{%- if loop.index > 3 %}{% break %}{% endif %}
{%- if m.role == 'assistant' %}{% continue %}{% endif %}
{{ loop.index0 }}:{{ m.content }};
{%- endfor %}
{% for x in [] %}never{% else %}empty-else{% endfor %}
{% for i in range(2, 10, 3) %}{{ i }}{{ ',' if not loop.last }}{% endfor %}
{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{% endfor %}/{{ loop.index }} {% endfor %}
{% for c in 'ab' %}{{ loop.cycle('odd', 'even') }}-{{ c }} {% endfor %}
{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}
{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}
{% set captured %}[{{ messages|length }} messages]{% endset %}{{ captured }}
{% macro greet(name, punct='!') -%}
Hello, {{ name }}{{ punct }}
{%- endmacro %}
{{ greet('world') }} {{ greet('you', punct='?') }} {{ greet(name='kw') }}
{% macro render(m) %}<{{ m.role }}>{% endmacro %}
{%- for m in messages %}{{ render(m) }}{% endfor %}
{% generation %}generated {{ 1 + 1 }}{% endgeneration %}
"""

PHI3_LIKE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

DEEPSEEK_LIKE = """{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}
{%- set ns = namespace(is_first=false, is_tool=false, system_prompt='') %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- set ns.system_prompt = message['content'] %}
    {%- endif %}
{%- endfor %}
{{- bos_token }}{{ ns.system_prompt }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '<｜User｜>' + message['content'] }}
    {%- endif %}
    {%- if message['role'] == 'assistant' and message['content'] is not none %}
        {%- set content = message['content'] %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1] %}
        {%- endif %}
        {{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"""

CHATML = ("{% for message in messages %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# Hermes-2-Pro-style tool template: recursive macro, tuple unpacking over |items, loop.previtem/nextitem
HERMES = r'''{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec["items"]) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}


{{- bos_token }}
{{- '<|im_start|>system\n' }}
{{- "You are a function calling AI model. <tools> " }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\n\n" }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {%- if loop.first %}
            {{- "    Args:\n" }}
        {%- endif %}
        {{- "        " + param_name + "(" + json_to_python_type(param_fields) + "): " + param_fields.description|default('')|trim }}
    {%- endfor %}
    {{- '", ' }}
    {{- '"parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\n" }}
    {%- endif %}
{%- endfor %}
{{- " </tools>" }}
{%- for message in messages %}
    {%- if message.role == "user" or message.role == "system" or (message.role == "assistant" and message.tool_calls is not defined) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
    {%- for tool_call in message.tool_calls %}
       {{- '\n<tool_call>\n' }}           {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '{' }}
            {{- '"name": "' }}
            {{- tool_call.name }}
            {{- '"' }}
            {{- ', '}}
            {%- if tool_call.arguments is defined %}
                {{- '"arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments|tojson }}
                {%- endif %}
            {%- endif %}
            {{- '}' }}
            {{- '\n</tool_call>' }}
    {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>tool\n' }}
        {%- endif %}
        {{- '<tool_response>\n' }}
        {{- message.content }}
        {%- if not loop.last %}
            {{- '\n</tool_response>\n' }}
        {%- else %}
            {{- '\n</tool_response>' }}
        {%- endif %}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>' }}
        {%- elif loop.last %}
            {{- '<|im_end|>' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
'''
# Mistral-v7-style: namespace() then attribute sets, selectattr, for ... if, string slicing of tojson
MISTRAL_V7 = r'''{%- set today = strftime_now("%Y") %}
{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
'''
# ---------------------------------------------------------------------------------- messages

BASIC = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there!  "},
    {"role": "assistant", "content": "Hello. How can I help?"},
    {"role": "user", "content": "Tell me a joke about C — with ünïcödé 😀."},
]
ALTERNATING = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And times 3?"},
]
BROKEN = [
    {"role": "user", "content": "one"},
    {"role": "user", "content": "two"},
]
NAMED = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "u1", "name": "alice"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
    {"role": "assistant", "content": "a2"},
    {"role": "user", "content": "u3"},
]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the weather in a city. Use \"metric\" units by default.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"},
                                      "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                      "units": {"type": "string", "enum": ["metric", "imperial"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {"type": "object", "properties": {}}}},
]
TOOL_CHAT = [
    {"role": "system", "content": "Use tools when useful."},
    {"role": "user", "content": "Weather in Zürich for 3 days?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                      "arguments": {"city": "Zürich", "days": 3}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    {"role": "tool", "content": "second result"},
    {"role": "assistant", "content": "It will be clear, 21.5 °C."},
    {"role": "user", "content": "Thanks"},
]
LLAMA_TOOL_CHAT = [
    {"role": "system", "content": "  Be helpful.  "},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                             "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": {"temp": 18, "unit": "C"}},
    {"role": "tool", "content": "plain text result"},
]
MULTIMODAL = [
    {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
    {"role": "user", "content": [{"type": "image", "url": "x.png"},
                                 {"type": "text", "text": "  What is this?  "}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
    {"role": "user", "content": "Sure?"},
]
THINK = [
    {"role": "system", "content": "sys prompt"},
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "<think>\nreasoning\n</think>\n\nanswer1"},
    {"role": "user", "content": "q2"},
]

TOOLS2 = TOOLS + [{"type":"function","function":{"name":"multi","description":"m","parameters":{"type":"object","properties":{"xs":{"type":"array","items":{"type":"number"}},"u":{"type":["string","integer"]},"o":{"type":"object","additionalProperties":{"type":"boolean"}}}},"return":{"type":"string"}}}]
MISTRAL_CHAT = [{"role":"system","content":"Sys"},{"role":"user","content":"Weather?"},
  {"role":"assistant","tool_calls":[{"id":"abcdefghi","type":"function","function":{"name":"get_weather","arguments":{"city":"Zürich"}}}]},
  {"role":"tool","tool_call_id":"abcdefghi","content":"{\"t\": 1}"},{"role":"tool","tool_call_id":"abcdefghi","content":"two"},
  {"role":"assistant","content":" Done. "},{"role":"user","content":"ok"}]
MISTRAL_BAD_ID = MISTRAL_CHAT[:2] + [{"role":"assistant","tool_calls":[{"id":"short","type":"function","function":{"name":"f","arguments":{}}}]}]

CASES = [
    ("mistral_ok", MISTRAL, ALTERNATING, True, None),
    ("mistral_alternation_error", MISTRAL, BROKEN, True, None),
    ("mistral_role_error", MISTRAL, [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}], False, None),
    ("llama31_plain", LLAMA31_LIKE, BASIC, True, None),
    ("llama31_tools", LLAMA31_LIKE, LLAMA_TOOL_CHAT, True, TOOLS),
    ("qwen25_no_tools", QWEN25_TOOLS, ALTERNATING, True, None),
    ("qwen25_tools", QWEN25_TOOLS, TOOL_CHAT, True, TOOLS),
    ("gemma_multimodal", GEMMA_LIKE, MULTIMODAL, True, None),
    ("gemma_alternation_error", GEMMA_LIKE, BROKEN, False, None),
    ("namespace_loop_last", NAMESPACE_LAST, NAMED, True, None),
    ("namespace_no_system", NAMESPACE_LAST, ALTERNATING, False, None),
    ("whitespace_control", WHITESPACE, ALTERNATING, False, None),
    ("filters", FILTERS, NAMED, False, TOOLS),
    ("expressions", EXPRESSIONS, ALTERNATING, False, None),
    ("loops_macros", LOOPS, NAMED, False, None),
    ("phi3_gen", PHI3_LIKE, BASIC, True, None),
    ("phi3_nogen", PHI3_LIKE, BASIC, False, None),
    ("deepseek_think", DEEPSEEK_LIKE, THINK, True, None),
    ("chatml", CHATML, BASIC, True, None),
    ("hermes_tools", HERMES, MISTRAL_CHAT, True, TOOLS2),
    ("mistral_v7_tools", MISTRAL_V7, MISTRAL_CHAT, True, TOOLS2),
    ("mistral_v7_no_tools", MISTRAL_V7, MISTRAL_CHAT, False, None),
    ("mistral_v7_bad_tool_id", MISTRAL_V7, MISTRAL_BAD_ID, True, None),
    ("mistral_v7_alternation", MISTRAL_V7, MISTRAL_CHAT[1:2] + MISTRAL_CHAT[1:2], True, None),
]


def main():
    out = []
    for name, tmpl, msgs, agp, tools in CASES:
        case = {"name": name, "template": tmpl, "messages": msgs, "add_generation_prompt": agp,
                "bos_token": "<s>", "eos_token": "</s>"}
        if tools is not None:
            case["tools"] = tools
        try:
            case["rendered"] = ENV.from_string(tmpl).render(
                messages=msgs, tools=tools, documents=None, add_generation_prompt=agp,
                bos_token="<s>", eos_token="</s>")
        except TemplateError as e:
            case["error"] = str(e)
        out.append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "jinja2 " + jinja2.__version__ + ", configured as transformers' "
                   "apply_chat_template", "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
