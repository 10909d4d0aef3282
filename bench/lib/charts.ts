/**
 * The two charts of docs/performance.md, rendered to SVG with vega-lite (compiled to a vega spec, drawn
 * by vega's headless view: no browser, no canvas).
 */
import { writeFileSync } from 'node:fs';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

const FONT = { font: 'Helvetica, Arial, sans-serif', labelFontSize: 11, titleFontSize: 12 };

export interface ThroughputPoint {
  batch: number;
  system: string;
  itemsPerSecond: number;
}

/** Items/s by batch size: opspad against raw BullMQ and the SQL ceiling. */
export async function throughputChart(points: readonly ThroughputPoint[], subtitle: string): Promise<string> {
  const systems = [...new Set(points.map((p) => p.system))];
  const batchLabel = (batch: number) => (batch === 1 ? '1 (a job per item)' : batch.toLocaleString('en-US'));
  const batches = [...new Set(points.map((p) => p.batch))].sort((a, b) => a - b).map(batchLabel);
  return renderSvg({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Items per second by batch size', subtitle, anchor: 'start', fontSize: 14, subtitleFontSize: 11 },
    width: 520,
    height: 300,
    background: 'white',
    config: { axis: FONT, legend: FONT, view: { stroke: null } },
    data: {
      values: points.map((p) => ({
        batch: batchLabel(p.batch),
        system: p.system,
        items: Math.round(p.itemsPerSecond),
        label:
          p.itemsPerSecond >= 1000 ? `${Math.round(p.itemsPerSecond / 1000)}k` : String(Math.round(p.itemsPerSecond)),
      })),
    },
    encoding: {
      x: {
        field: 'batch',
        type: 'ordinal',
        title: 'items per batch',
        sort: batches,
        axis: { labelAngle: 0 },
      },
      xOffset: { field: 'system', sort: systems },
      y: { field: 'items', type: 'quantitative', title: 'items / s', axis: { format: '~s' } },
      color: {
        field: 'system',
        type: 'nominal',
        sort: systems,
        title: null,
        scale: {
          range: [
            '#9aa5b1',
            '#4c78a8',
            '#e45756',
            '#f58518',
            '#54a24b',
            '#b279a2',
            '#72b7b2',
            '#eeca3b',
            '#9d755d',
            '#ff9da6',
          ],
        },
        legend: { orient: 'top-left', direction: 'vertical', labelLimit: 400 },
      },
    },
    layer: [
      { mark: { type: 'bar' } },
      {
        mark: { type: 'text', dy: -6, fontSize: 10 },
        encoding: { text: { field: 'label' }, color: { value: '#333' } },
      },
    ],
  });
}

export interface RecordPoint {
  size: number;
  design: string;
  ms: number;
}

/** Milliseconds per 5-item update by operation size: opspad against the seed's JSONB design. */
export async function recordCostChart(points: readonly RecordPoint[], subtitle: string): Promise<string> {
  return renderSvg({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'Cost of recording a 5-item batch by operation size',
      subtitle,
      anchor: 'start',
      fontSize: 14,
      subtitleFontSize: 11,
    },
    width: 520,
    height: 300,
    background: 'white',
    config: { axis: FONT, legend: FONT, view: { stroke: null } },
    data: {
      values: points.map((p) => ({ ...p, label: p.ms >= 10 ? `${Math.round(p.ms)} ms` : `${p.ms.toFixed(1)} ms` })),
    },
    encoding: {
      x: {
        field: 'size',
        type: 'quantitative',
        title: 'items in the operation',
        scale: { type: 'log' },
        axis: { values: [...new Set(points.map((p) => p.size))], format: '~s' },
      },
      y: {
        field: 'ms',
        type: 'quantitative',
        title: 'ms per update (median, log scale)',
        scale: { type: 'log' },
      },
      color: {
        field: 'design',
        type: 'nominal',
        title: null,
        scale: { range: ['#f58518', '#9aa5b1'] },
        legend: { orient: 'top-left', direction: 'vertical', labelLimit: 400 },
      },
    },
    layer: [
      { mark: { type: 'line', point: { size: 50, filled: true }, strokeWidth: 2 } },
      // opspad's labels under its line, the seed's above: at small sizes the two lines meet.
      {
        transform: [{ filter: "indexof(datum.design, 'opspad') === 0" }],
        mark: { type: 'text', dy: 14, fontSize: 10 },
        encoding: { text: { field: 'label' }, color: { value: '#333' } },
      },
      {
        transform: [{ filter: "indexof(datum.design, 'opspad') !== 0" }],
        mark: { type: 'text', dy: -10, fontSize: 10 },
        encoding: { text: { field: 'label' }, color: { value: '#333' } },
      },
    ],
  });
}

export function writeSvg(path: string, svg: string): void {
  writeFileSync(path, svg);
}
