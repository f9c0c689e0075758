<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN" sourcelanguage="en">
<context>
    <name>About</name>
    <message>
        <source>PyTorch {0}, {1} CPU thread(s)</source>
        <translation>PyTorch {0}，{1} 个 CPU 线程</translation>
    </message>
    <message>
        <source>About kvviz</source>
        <translation>关于 kvviz</translation>
    </message>
    <message>
        <source>kvviz {0}</source>
        <translation>kvviz {0}</translation>
    </message>
    <message>
        <source>kvviz makes a transformer&apos;s KV cache visible: type a prompt, pick engines and watch decode step by step.</source>
        <translation>kvviz 让 Transformer 的 KV Cache 变得可见：输入 prompt，选择引擎，一步一步观看 Decode 过程。</translation>
    </message>
</context>
<context>
    <name>AnimationExportDialog</name>
    <message>
        <source>Export animation</source>
        <translation>导出动画</translation>
    </message>
    <message>
        <source>Panels (side by side, one frame per step):</source>
        <translation>面板（并排显示，每步一帧）：</translation>
    </message>
    <message>
        <source>GIF (plays anywhere, larger)</source>
        <translation>GIF（随处可播放，文件较大）</translation>
    </message>
    <message>
        <source>MP4 (H.264, small, for slides and video players)</source>
        <translation>MP4（H.264，文件小，适合幻灯片和视频播放器）</translation>
    </message>
    <message>
        <source> frames/s</source>
        <translation> 帧/秒</translation>
    </message>
    <message>
        <source>Format</source>
        <translation>格式</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>速度</translation>
    </message>
    <message>
        <source>From step</source>
        <translation>起始步</translation>
    </message>
    <message>
        <source>To step</source>
        <translation>结束步</translation>
    </message>
    <message>
        <source>Scale</source>
        <translation>缩放</translation>
    </message>
    <message>
        <source>Tick at least one panel.</source>
        <translation>请至少勾选一个面板。</translation>
    </message>
    <message>
        <source>&apos;From step&apos; must not be after &apos;To step&apos;.</source>
        <translation>“起始步”不能晚于“结束步”。</translation>
    </message>
    <message>
        <source>{0} frames, {1:.1f} s at this speed</source>
        <translation>{0} 帧，按此速度播放 {1:.1f} 秒</translation>
    </message>
</context>
<context>
    <name>AttentionPanel</name>
    <message>
        <source>layer {layer}, head {head}, step {step}</source>
        <translation>第 {layer} 层，第 {head} 个头，第 {step} 步</translation>
    </message>
    <message>
        <source>Outlined: the {rows} row(s) computed at this step. The {earlier} rows above were computed at earlier steps.</source>
        <translation>框出部分：本步计算的 {rows} 行。上方的 {earlier} 行是之前各步算出的。</translation>
    </message>
    <message>
        <source>Outlined: the {rows} row(s) computed at this step.</source>
        <translation>框出部分：本步计算的 {rows} 行。</translation>
    </message>
    <message>
        <source>No attention weights recorded in this run.</source>
        <translation>本次运行没有记录注意力权重。</translation>
    </message>
    <message>
        <source>weight</source>
        <translation>权重</translation>
    </message>
    <message>
        <source>Which engine&apos;s recorded weights to show</source>
        <translation>显示哪个引擎记录的注意力权重</translation>
    </message>
    <message>
        <source>Engine:</source>
        <translation>引擎：</translation>
    </message>
    <message>
        <source>query position</source>
        <translation>query 位置</translation>
    </message>
    <message>
        <source>key position</source>
        <translation>key 位置</translation>
    </message>
    <message>
        <source>Attention weights</source>
        <translation>注意力权重</translation>
    </message>
    <message>
        <source>softmax(Q K^T / sqrt(d)) of one layer and head: row i is how much query i looks at each earlier key; the causal mask hides the future (grey). Naive recomputes the whole matrix every step; a cached engine computes only the outlined new row and reads the keys from the cache, so its matrix fills in row by row. The rows agree across engines: the cache changes no math.</source>
        <translation>某一层、某一个头的 softmax(Q K^T / sqrt(d))：第 i 行表示 query i 对之前每个 key 的关注程度；因果掩码遮住未来（灰色）。朴素引擎每步都重算整个矩阵；带缓存的引擎只计算框出的新一行，key 从缓存读取，所以它的矩阵逐行填满。各引擎的每一行都相同：缓存不改变数学结果。</translation>
    </message>
</context>
<context>
    <name>BytesPanel</name>
    <message>
        <source>{engine}: {copied} copied</source>
        <translation>{engine}：复制 {copied}</translation>
    </message>
    <message>
        <source>, {gathered} gathered</source>
        <translation>，gather 拷贝 {gathered}</translation>
    </message>
    <message>
        <source>per step (dashed: gathered)</source>
        <translation>每步（虚线：gather 拷贝）</translation>
    </message>
    <message>
        <source>bytes</source>
        <translation>字节</translation>
    </message>
    <message>
        <source>total so far</source>
        <translation>累计</translation>
    </message>
    <message>
        <source>Bytes copied</source>
        <translation>复制字节数</translation>
    </message>
    <message>
        <source>The chapter&apos;s torch.cat cache copies the whole history into a new tensor every step: O(k) bytes at step k, O(n²) over a generation (the total curves upward). A static cache is preallocated and a paged cache takes fixed-size blocks; both write the new token in place and copy nothing. Dashed: bytes gathered only to feed attention (the paged blocks copied into one contiguous tensor; a fused paged-attention kernel would read them in place).</source>
        <translation>本章的 torch.cat 缓存每步都把全部历史复制到一个新张量：第 k 步复制 O(k) 字节，整个生成过程共 O(n²)（累计曲线向上弯）。静态缓存预先分配好空间，分页缓存按固定大小的块分配；两者都把新 token 原地 (in-place) 写入，不复制任何数据。虚线：仅为喂给注意力而 gather 的字节（把分页的各个块拷贝成一个连续张量；融合的 paged-attention 内核可以原地读取它们）。</translation>
    </message>
</context>
<context>
    <name>CacheMemoryPanel</name>
    <message>
        <source>{engine}: {bytes}, room for {cap} tokens, {held} held</source>
        <translation>{engine}：{bytes}，可容纳 {cap} 个 token，已存 {held} 个</translation>
    </message>
    <message>
        <source>{engine}: {bytes}, {cap} tokens</source>
        <translation>{engine}：{bytes}，{cap} 个 token</translation>
    </message>
    <message>
        <source>slot holding K/V</source>
        <translation>存有 K/V 的槽位</translation>
    </message>
    <message>
        <source>reserved, empty</source>
        <translation>已预留，空闲</translation>
    </message>
    <message>
        <source>pool {n} × {size} slots</source>
        <translation>块池 {n} × {size} 个槽位</translation>
    </message>
    <message>
        <source>block table [{table}]</source>
        <translation>块表 [{table}]</translation>
    </message>
    <message>
        <source>resident K/V</source>
        <translation>常驻 K/V</translation>
    </message>
    <message>
        <source>memory</source>
        <translation>内存</translation>
    </message>
    <message>
        <source>capacity (tokens)</source>
        <translation>容量（token 数）</translation>
    </message>
    <message>
        <source>drafted, accepted</source>
        <translation>草稿，已接受</translation>
    </message>
    <message>
        <source>drafted, rejected: left in place</source>
        <translation>草稿，被拒绝：留在原处</translation>
    </message>
    <message>
        <source>drafted, rejected: freed</source>
        <translation>草稿，被拒绝：已释放</translation>
    </message>
    <message>
        <source>written over a rejected slot</source>
        <translation>覆盖写入被拒绝的槽位</translation>
    </message>
    <message>
        <source>written this step</source>
        <translation>本步写入</translation>
    </message>
    <message>
        <source>free block</source>
        <translation>空闲块</translation>
    </message>
    <message>
        <source>Cache memory</source>
        <translation>缓存内存</translation>
    </message>
    <message>
        <source>Per token and layer a cache holds K and V: 2 · kv_heads · d_head · bytes. concat holds exactly the tokens so far but reallocates every step; static reserves the whole run up front; paged takes a fixed-size block from a pool only when the last one is full, so at most one block is partly empty (salmon). The grid is the pool: the block table (#0, #1, ...) holds the sequence together, not adjacency: the grid shows pool blocks 0, 1, 2, ... left to right, labelled with their place in the table.</source>
        <translation>每个 token、每一层，缓存都要存 K 和 V：2 · kv_heads · d_head · 字节数。concat 恰好只存已有的 token，但每步都重新分配内存；static 一开始就为整次运行预留空间；paged 只在最后一个块写满时才从池中取一个固定大小的新块，所以最多只有一个块部分空闲（浅橙色）。网格就是块池：把序列串起来的是块表（#0、#1、...），而不是块在池中是否相邻：网格从左到右依次是池中的块 0、1、2、...，标签是它们在块表中的序号。</translation>
    </message>
    <message>
        <source>With a speculative engine in the run the grid is its cache instead, {n} positions a tile: a round&apos;s drafted slots in the work matrix&apos;s colours (accepted; rejected and left in place for the next forward to write over, or freed; written over a rejected slot), and what its rollback rule wrote and undid.</source>
        <translation>运行中有投机解码引擎时，网格改为显示它的缓存，每格 {n} 个位置：一轮起草的槽位按工作矩阵的颜色显示（已接受；被拒绝并留在原处、等下一次前向覆盖写入，或已释放；覆盖写入被拒绝的槽位），以及它的回滚规则写入和撤销的字节。</translation>
    </message>
    <message>
        <source>tokens held</source>
        <translation>已存 token 数</translation>
    </message>
    <message>
        <source>no paged engine: no block table</source>
        <translation>没有 paged 引擎：无块表</translation>
    </message>
    <message>
        <source>cache slots, {n} positions a tile</source>
        <translation>缓存槽位，每格 {n} 个位置</translation>
    </message>
    <message>
        <source>this round wrote {written}, undid {undone}, wrote over {over}</source>
        <translation>本轮写入 {written}，撤销 {undone}，覆盖写入 {over}</translation>
    </message>
    <message>
        <source>steps 0 to {step}: wrote {written}, undid {undone}, wrote over {over}</source>
        <translation>第 0 至 {step} 步：写入 {written}，撤销 {undone}，覆盖写入 {over}</translation>
    </message>
</context>
<context>
    <name>CountersPanel</name>
    <message>
        <source>Counters</source>
        <translation>计数</translation>
    </message>
    <message>
        <source>steps</source>
        <translation>步数</translation>
    </message>
    <message>
        <source>padding</source>
        <translation>填充</translation>
    </message>
    <message>
        <source>padding %</source>
        <translation>填充占比</translation>
    </message>
    <message>
        <source>idle</source>
        <translation>空闲</translation>
    </message>
    <message>
        <source>idle %</source>
        <translation>空闲占比</translation>
    </message>
    <message>
        <source>prefix hits</source>
        <translation>前缀命中</translation>
    </message>
    <message>
        <source>tokens saved</source>
        <translation>省下的 token</translation>
    </message>
    <message>
        <source>prefilled</source>
        <translation>已预填充</translation>
    </message>
    <message>
        <source>preempted</source>
        <translation>被抢占</translation>
    </message>
    <message>
        <source>tokens</source>
        <translation>token 数</translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation>token/秒</translation>
    </message>
    <message>
        <source>peak blocks</source>
        <translation>峰值块数</translation>
    </message>
    <message>
        <source>Per scheduler, up to this step: padding and idle slots (computed and thrown away) and their share of the prefill and generation slots; prefix hits: the share of prefill positions the prefix cache served, and the tokens it saved; prefilled: the positions prefilled; preemptions; tokens generated and tokens per second of step time; the most pool blocks held at once.</source>
        <translation>每个调度器截至本步：填充槽位与空闲槽位（算了又扔掉）及其在预填充槽位和生成槽位中的占比；前缀命中：由前缀缓存提供的预填充位置占比，以及因此省下的 token；已预填充：实际预填充的位置数；抢占次数；生成的 token 数与按步耗时计算的每秒 token 数；同时占用的最多块数。</translation>
    </message>
    <message>
        <source>failed</source>
        <translation>失败</translation>
    </message>
    <message>
        <source>starting {0:.0f} s</source>
        <translation>启动中 {0:.0f} 秒</translation>
    </message>
    <message>
        <source>vLLM does not report this</source>
        <translation>vLLM 不报告这一项</translation>
    </message>
    <message>
        <source>vLLM {0}, settings as {1}&apos;s; prefix hits and tokens saved are its cached prompt tokens, prefilled its prompt tokens computed, peak blocks its KV cache usage times the pool&apos;s blocks</source>
        <translation>vLLM {0}，设置与 {1} 相同；前缀命中和省下的 token 取自它缓存命中的提示 token，已预填充取自它实际计算的提示 token，峰值块数是它的 KV 缓存占用率乘以块池的块数</translation>
    </message>
</context>
<context>
    <name>DockTitleBar</name>
    <message>
        <source>Float</source>
        <translation>浮动</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
</context>
<context>
    <name>DownloadDialog</name>
    <message>
        <source>Download model</source>
        <translation>下载模型</translation>
    </message>
    <message>
        <source>ORG/NAME or ORG/NAME@REVISION, e.g. Qwen/Qwen3-0.6B</source>
        <translation>ORG/NAME 或 ORG/NAME@REVISION，例如 Qwen/Qwen3-0.6B</translation>
    </message>
    <message>
        <source>From {0} (set HF_ENDPOINT for a mirror) into the Hugging Face cache. Only config.json, tokenizer.json and the safetensors weights are fetched.</source>
        <translation>从 {0} 下载到 Hugging Face 缓存（设置 HF_ENDPOINT 可使用镜像）。只下载 config.json、tokenizer.json 和 safetensors 权重。</translation>
    </message>
    <message>
        <source>Download</source>
        <translation>下载</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Model id:</source>
        <translation>模型 id：</translation>
    </message>
    <message>
        <source>Asking the server what {0} holds...</source>
        <translation>正在向服务器查询 {0} 包含的文件...</translation>
    </message>
    <message>
        <source>Cancelling...</source>
        <translation>正在取消...</translation>
    </message>
    <message>
        <source>{done} of {total} ({share:.0f}%), {rate}/s, {left} left</source>
        <translation>{done} / {total}（{share:.0f}%），{rate}/s，剩余 {left}</translation>
    </message>
    <message>
        <source>File {index} of {n}: {file}</source>
        <translation>第 {index} 个文件，共 {n} 个：{file}</translation>
    </message>
    <message>
        <source>Done: {0} is in the model box.</source>
        <translation>完成：{0} 已加入模型列表。</translation>
    </message>
    <message>
        <source>{id} from {endpoint}: {n} files, {total} ({fetch} to fetch)</source>
        <translation>{id}，来自 {endpoint}：{n} 个文件，共 {total}（需下载 {fetch}）</translation>
    </message>
    <message>
        <source>Cancelled: {kept} of {total} kept; Download resumes from there.</source>
        <translation>已取消：保留了 {kept} / {total}；再次点击“下载”将从此处继续。</translation>
    </message>
    <message>
        <source>The disk filled up; free some space and press Download to resume.</source>
        <translation>磁盘已满；请释放空间后点击“下载”继续。</translation>
    </message>
</context>
<context>
    <name>ExportActions</name>
    <message>
        <source>&amp;Image...</source>
        <translation>图片(&amp;I)...</translation>
    </message>
    <message>
        <source>Export the window or one panel as PNG or SVG</source>
        <translation>将整个窗口或单个面板导出为 PNG 或 SVG</translation>
    </message>
    <message>
        <source>&amp;Copy window image</source>
        <translation>复制窗口图像(&amp;C)</translation>
    </message>
    <message>
        <source>Copy the whole window to the clipboard</source>
        <translation>把整个窗口复制到剪贴板</translation>
    </message>
    <message>
        <source>&amp;Animation (GIF/MP4)...</source>
        <translation>动画 (GIF/MP4)(&amp;A)...</translation>
    </message>
    <message>
        <source>One frame per step of the chosen panels, as GIF or MP4</source>
        <translation>所选面板每步一帧，导出为 GIF 或 MP4</translation>
    </message>
    <message>
        <source>Trace as &amp;JSON...</source>
        <translation>追踪记录 JSON(&amp;J)...</translation>
    </message>
    <message>
        <source>Every step of every engine, masks and weights included; File &gt; Open trace replays it</source>
        <translation>每个引擎的每一步，含掩码和注意力权重；可用“文件 &gt; 打开追踪记录”回放</translation>
    </message>
    <message>
        <source>Steps as CS&amp;V...</source>
        <translation>逐步数据 CSV(&amp;V)...</translation>
    </message>
    <message>
        <source>One row per engine and step, scalar fields</source>
        <translation>每个引擎每一步一行，仅含标量字段</translation>
    </message>
    <message>
        <source>Summary as &amp;CSV...</source>
        <translation>汇总表 CSV(&amp;C)...</translation>
    </message>
    <message>
        <source>The summary table</source>
        <translation>汇总表</translation>
    </message>
    <message>
        <source>Summary as &amp;Markdown...</source>
        <translation>汇总表 Markdown(&amp;M)...</translation>
    </message>
    <message>
        <source>The summary table, ready for notes and slides</source>
        <translation>汇总表，可直接用于讲义和幻灯片</translation>
    </message>
    <message>
        <source>Open &amp;trace...</source>
        <translation>打开追踪记录(&amp;T)...</translation>
    </message>
    <message>
        <source>Replay a saved run (JSON) without a model</source>
        <translation>无需模型即可回放已保存的运行 (JSON)</translation>
    </message>
    <message>
        <source>Export</source>
        <translation>导出</translation>
    </message>
    <message>
        <source>&amp;Export</source>
        <translation>导出(&amp;E)</translation>
    </message>
    <message>
        <source>kvviz traces (*.json)</source>
        <translation>kvviz 追踪记录 (*.json)</translation>
    </message>
    <message>
        <source>CSV files (*.csv)</source>
        <translation>CSV 文件 (*.csv)</translation>
    </message>
    <message>
        <source>Markdown files (*.md)</source>
        <translation>Markdown 文件 (*.md)</translation>
    </message>
    <message>
        <source>Export data</source>
        <translation>导出数据</translation>
    </message>
    <message>
        <source>Data export</source>
        <translation>数据导出</translation>
    </message>
    <message>
        <source>{0} bytes</source>
        <translation>{0} 字节</translation>
    </message>
    <message>
        <source>Saved {0}</source>
        <translation>已保存 {0}</translation>
    </message>
    <message>
        <source>{0} failed: {1}</source>
        <translation>{0}失败：{1}</translation>
    </message>
    <message>
        <source>PNG images (*.png)</source>
        <translation>PNG 图片 (*.png)</translation>
    </message>
    <message>
        <source>SVG images (*.svg)</source>
        <translation>SVG 图片 (*.svg)</translation>
    </message>
    <message>
        <source>Export image</source>
        <translation>导出图片</translation>
    </message>
    <message>
        <source>Image export</source>
        <translation>图片导出</translation>
    </message>
    <message>
        <source>Copied {0} × {1} pixels to the clipboard</source>
        <translation>已复制 {0} × {1} 像素的图像到剪贴板</translation>
    </message>
    <message>
        <source>Animation export</source>
        <translation>动画导出</translation>
    </message>
    <message>
        <source>GIF animations (*.gif)</source>
        <translation>GIF 动画 (*.gif)</translation>
    </message>
    <message>
        <source>MP4 videos (*.mp4)</source>
        <translation>MP4 视频 (*.mp4)</translation>
    </message>
    <message>
        <source>Export animation</source>
        <translation>导出动画</translation>
    </message>
    <message>
        <source>Rendering one frame per step...</source>
        <translation>正在逐步渲染，每步一帧...</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Encoding...</source>
        <translation>正在编码...</translation>
    </message>
    <message>
        <source>Animation cancelled; nothing was saved.</source>
        <translation>已取消动画导出，未保存任何文件。</translation>
    </message>
    <message>
        <source>{0} frames in {1:.1f} s</source>
        <translation>{0} 帧，用时 {1:.1f} 秒</translation>
    </message>
    <message>
        <source>Open trace</source>
        <translation>打开追踪记录</translation>
    </message>
    <message>
        <source>kvviz traces (*.json);;All files (*)</source>
        <translation>kvviz 追踪记录 (*.json);;所有文件 (*)</translation>
    </message>
    <message>
        <source>Could not open the trace: {0}</source>
        <translation>无法打开追踪记录：{0}</translation>
    </message>
    <message>
        <source>Something failed inside kvviz: {0}: {1} (the details are on the terminal; please report them)</source>
        <translation>kvviz 内部出错：{0}：{1}（详细信息在终端中，请报告）</translation>
    </message>
    <message>
        <source>Whole window</source>
        <translation>整个窗口</translation>
    </message>
    <message>
        <source>unknown panel {0!r}; choose from {1}</source>
        <translation>未知面板 {0!r}；可选：{1}</translation>
    </message>
    <message>
        <source>the panel {0!r} is hidden: show it (View menu) to export it</source>
        <translation>面板 {0!r} 已隐藏：请先在“视图”菜单中显示它再导出</translation>
    </message>
    <message>
        <source>nothing to export yet: run the engines or open a saved trace first</source>
        <translation>还没有可导出的内容：请先运行引擎，或打开已保存的追踪记录</translation>
    </message>
    <message>
        <source>prefill</source>
        <translation>预填充</translation>
    </message>
    <message>
        <source>decode</source>
        <translation>解码</translation>
    </message>
    <message>
        <source>step {0} of {1} · {2}</source>
        <translation>第 {0} / {1} 步 · {2}</translation>
    </message>
    <message>
        <source>choose at least one panel (or the whole window)</source>
        <translation>请至少选择一个面板（或整个窗口）</translation>
    </message>
    <message>
        <source>image format must be one of {0}</source>
        <translation>图片格式必须是以下之一：{0}</translation>
    </message>
    <message>
        <source>no file name given</source>
        <translation>未提供文件名</translation>
    </message>
    <message>
        <source>data export must be one of {0}</source>
        <translation>数据导出类型必须是以下之一：{0}</translation>
    </message>
    <message>
        <source>the steps must satisfy 0 &lt;= from &lt;= to &lt;= {0}, got {1}..{2}</source>
        <translation>步数范围须满足 0 &lt;= 起始 &lt;= 结束 &lt;= {0}，实际为 {1}..{2}</translation>
    </message>
    <message>
        <source>the trace holds no steps</source>
        <translation>该追踪记录不含任何步骤</translation>
    </message>
    <message>
        <source>the trace mixes steps of {0} runs</source>
        <translation>该追踪记录混杂了 {0} 次运行的步骤</translation>
    </message>
    <message>
        <source>Replaying {0}: {1} steps of {2}</source>
        <translation>正在回放 {0}：{2} 的 {1} 步</translation>
    </message>
    <message>
        <source>a saved run</source>
        <translation>已保存的运行</translation>
    </message>
</context>
<context>
    <name>ImageExportDialog</name>
    <message>
        <source>Export image</source>
        <translation>导出图片</translation>
    </message>
    <message>
        <source>PNG image</source>
        <translation>PNG 图片</translation>
    </message>
    <message>
        <source>SVG (vector)</source>
        <translation>SVG（矢量图）</translation>
    </message>
    <message>
        <source>Copy to the clipboard</source>
        <translation>复制到剪贴板</translation>
    </message>
    <message>
        <source>2× gives a sharp image for slides: everything is drawn again at twice the resolution, not enlarged</source>
        <translation>2× 可为幻灯片生成清晰图像：所有内容按两倍分辨率重新绘制，而不是简单放大</translation>
    </message>
    <message>
        <source>Export</source>
        <translation>导出</translation>
    </message>
    <message>
        <source>As</source>
        <translation>导出为</translation>
    </message>
    <message>
        <source>Scale</source>
        <translation>缩放</translation>
    </message>
    <message>
        <source>{0} × {1} (vector, any size)</source>
        <translation>{0} × {1}（矢量，可任意缩放）</translation>
    </message>
    <message>
        <source>{0} × {1} pixels</source>
        <translation>{0} × {1} 像素</translation>
    </message>
</context>
<context>
    <name>LatencyPanel</name>
    <message>
        <source>{engine}: {ms:.2f} ms/step</source>
        <translation>{engine}：{ms:.2f} 毫秒/步</translation>
    </message>
    <message>
        <source>copy bandwidth {0} GB/s</source>
        <translation>复制带宽 {0} GB/s</translation>
    </message>
    <message>
        <source>read ceiling {0} GB/s</source>
        <translation>读取上限 {0} GB/s</translation>
    </message>
    <message>
        <source>TTFT</source>
        <translation>TTFT</translation>
    </message>
    <message>
        <source>TPOT</source>
        <translation>TPOT</translation>
    </message>
    <message>
        <source>request</source>
        <translation>请求</translation>
    </message>
    <message>
        <source>Latency per request</source>
        <translation>每个请求的延迟</translation>
    </message>
    <message>
        <source>per step</source>
        <translation>每步</translation>
    </message>
    <message>
        <source>latency</source>
        <translation>延迟</translation>
    </message>
    <message>
        <source>total so far</source>
        <translation>累计</translation>
    </message>
    <message>
        <source>time</source>
        <translation>时间</translation>
    </message>
    <message>
        <source>weights + K/V read / step time</source>
        <translation>读取的权重 + K/V / 每步耗时</translation>
    </message>
    <message>
        <source>read</source>
        <translation>读取</translation>
    </message>
    <message>
        <source>Latency</source>
        <translation>延迟</translation>
    </message>
    <message>
        <source>The legend gives each engine&apos;s mean decode step. Step 0 is the prefill: one forward over the whole prompt. After it, naive&apos;s step time grows with the sequence because it re-runs everything, while a cached step feeds one token. On a tiny model Python overhead dominates the clock, so also look at the work saved (recompute count, bytes): the time gap widens as sequences and models grow. Bottom: every step reads every weight once and the K/V of every position it attends over; those bytes over the step&apos;s time are the bandwidth it achieved, drawn against this machine&apos;s measured read ceiling (dashed: a matrix-vector product&apos;s read rate at the run&apos;s threads): decode is bound by memory, not arithmetic.</source>
        <translation>图例给出每个引擎 Decode 步的平均耗时。第 0 步是 Prefill：对整个 prompt 做一次前向。之后，朴素引擎的每步耗时随序列变长而增加，因为它每次都重跑全部内容；而带缓存的引擎每步只输入 1 个 token。在很小的模型上，Python 开销主导了耗时，所以也要看省下的工作量（重算次数、字节数）：序列越长、模型越大，时间差距越明显。下图：每一步都要把每个权重读一遍，并读取它所关注的每个位置的 K/V；这些字节除以该步耗时就是它达到的带宽，与本机实测的读取上限（虚线：以本次运行的线程数做矩阵-向量乘的读取速率）对照：Decode 受内存带宽限制，而不是算力。</translation>
    </message>
    <message>
        <source>Time to first token (from the request&apos;s arrival step to the step that emitted its first token) and time per output token after it, per request and scheduler, as of this step.</source>
        <translation>首 token 时间（从请求到达的那一步到输出第一个 token 的那一步）和其后每个输出 token 的时间，按请求和调度器，截至本步。</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>kvviz: the KV cache, step by step</source>
        <translation>kvviz：一步一步看懂 KV Cache</translation>
    </message>
    <message>
        <source>Inputs</source>
        <translation>输入</translation>
    </message>
    <message>
        <source>finished: {0} steps</source>
        <translation>完成：共 {0} 步</translation>
    </message>
    <message>
        <source>stopped after {0} of {1} steps</source>
        <translation>已停止：完成 {0} / {1} 步</translation>
    </message>
    <message>
        <source>The quality panel is shown: this run has an approximate cache (View hides it again).</source>
        <translation>已显示“质量”面板：这次运行含有近似缓存（可在“视图”菜单中再隐藏）。</translation>
    </message>
    <message>
        <source>This run will take about {0}; the bar beside the timeline shows the time left.</source>
        <translation>这次运行大约需要 {0}；时间轴旁的进度条显示剩余时间。</translation>
    </message>
    <message>
        <source>This run has ended: Run (Ctrl+R) starts a new one.</source>
        <translation>这次运行已结束：按“运行”(Ctrl+R) 开始新的一次。</translation>
    </message>
    <message>
        <source>Add this view as a scene</source>
        <translation>把此视图添加为场景</translation>
    </message>
    <message>
        <source>Title:</source>
        <translation>标题：</translation>
    </message>
    <message>
        <source>Caption (the title if empty):</source>
        <translation>说明文字（为空时用标题）：</translation>
    </message>
    <message>
        <source>Lessons (*.toml)</source>
        <translation>课程 (*.toml)</translation>
    </message>
    <message>
        <source>Scene added to {0}</source>
        <translation>场景已添加到 {0}</translation>
    </message>
    <message>
        <source>Open checkpoint folder</source>
        <translation>打开检查点文件夹</translation>
    </message>
    <message>
        <source>Start a compare run of the checked engines</source>
        <translation>让勾选的引擎同时运行并对比</translation>
    </message>
    <message>
        <source>Pause or resume the run</source>
        <translation>暂停或继续运行</translation>
    </message>
    <message>
        <source>Run one step of every engine, then pause</source>
        <translation>每个引擎各运行一步，然后暂停</translation>
    </message>
    <message>
        <source>Stop the run; its steps stay viewable</source>
        <translation>停止运行；已记录的步骤仍可查看</translation>
    </message>
    <message>
        <source>Show the step before</source>
        <translation>显示前一步</translation>
    </message>
    <message>
        <source>Show the step after; at the newest step of a paused run, compute one more</source>
        <translation>显示后一步；若运行已暂停且位于最新一步，则再计算一步</translation>
    </message>
    <message>
        <source>Open checkpoint...</source>
        <translation>打开检查点...</translation>
    </message>
    <message>
        <source>Add a model folder (config.json and weights) to the model picker</source>
        <translation>把一个模型文件夹（config.json 和权重）加入模型列表</translation>
    </message>
    <message>
        <source>Download model...</source>
        <translation>下载模型...</translation>
    </message>
    <message>
        <source>Fetch a checkpoint from the Hugging Face Hub (or HF_ENDPOINT&apos;s mirror) by its id</source>
        <translation>按 id 从 Hugging Face Hub（或 HF_ENDPOINT 指定的镜像）下载 checkpoint</translation>
    </message>
    <message>
        <source>Edit prompt</source>
        <translation>编辑 prompt</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>退出(&amp;Q)</translation>
    </message>
    <message>
        <source>&amp;About kvviz</source>
        <translation>关于 kvviz(&amp;A)</translation>
    </message>
    <message>
        <source>&amp;Keyboard shortcuts</source>
        <translation>键盘快捷键(&amp;K)</translation>
    </message>
    <message>
        <source>&amp;Serve view</source>
        <translation>服务视图(&amp;S)</translation>
    </message>
    <message>
        <source>Many requests, one model: the schedulers side by side</source>
        <translation>多个请求，一个模型：各调度器并排对比</translation>
    </message>
    <message>
        <source>Continue in the Serve view...</source>
        <translation>在服务视图中继续...</translation>
    </message>
    <message>
        <source>The text so far and your next message as a chat, served by prefix and paged</source>
        <translation>把目前的文本和你的下一条消息作为对话，用 prefix 和 paged 来服务</translation>
    </message>
    <message>
        <source>Watch a server...</source>
        <translation>监控服务器...</translation>
    </message>
    <message>
        <source>Running vLLM servers&apos; state and feeds, live, in a window of their own</source>
        <translation>正在运行的 vLLM 服务器的状态与数据流，在单独的窗口中实时显示</translation>
    </message>
    <message>
        <source>Open a watch recording...</source>
        <translation>打开监控录制...</translation>
    </message>
    <message>
        <source>A recording of watched servers, replayed</source>
        <translation>回放一份被监控服务器的录制</translation>
    </message>
    <message>
        <source>Open lesson...</source>
        <translation>打开课程...</translation>
    </message>
    <message>
        <source>A lesson presented full screen, its runs made once</source>
        <translation>全屏演示一节课程，其中的运行只生成一次</translation>
    </message>
    <message>
        <source>Add this view as a scene...</source>
        <translation>把此视图添加为场景...</translation>
    </message>
    <message>
        <source>The form&apos;s run, the step, the panels and the zoom as a scene of a .toml lesson</source>
        <translation>把表单的运行、当前步、面板和缩放保存为 .toml 课程中的一个场景</translation>
    </message>
    <message>
        <source>Edit scenes...</source>
        <translation>编辑场景...</translation>
    </message>
    <message>
        <source>A lesson&apos;s scenes reordered, retitled in English and Chinese, or removed</source>
        <translation>调整课程场景的顺序、修改中英文标题或删除场景</translation>
    </message>
    <message>
        <source>Open session...</source>
        <translation>打开会话...</translation>
    </message>
    <message>
        <source>A saved session: the form, panels, zoom and step set again, its run replayed</source>
        <translation>已保存的会话：恢复表单、面板、缩放和步骤，并回放其运行</translation>
    </message>
    <message>
        <source>Save session...</source>
        <translation>保存会话...</translation>
    </message>
    <message>
        <source>The form, panels, zoom and step in a session file, the run as a trace beside it</source>
        <translation>将表单、面板、缩放和步骤保存为会话文件，运行记录作为轨迹文件保存在旁边</translation>
    </message>
    <message>
        <source>Memory calculator...</source>
        <translation>显存计算器...</translation>
    </message>
    <message>
        <source>What a model&apos;s KV cache costs at scale, computed from its config</source>
        <translation>按模型配置计算 KV Cache 在大规模下的显存开销</translation>
    </message>
    <message>
        <source>Reset layout</source>
        <translation>重置布局</translation>
    </message>
    <message>
        <source>The panels, sizes and docks a run of this kind starts with</source>
        <translation>这类运行开始时的面板、尺寸和停靠窗</translation>
    </message>
    <message>
        <source>Zoom in</source>
        <translation>放大</translation>
    </message>
    <message>
        <source>Text, plots, lines and markers larger, now</source>
        <translation>文字、图表、线条和标记立即放大</translation>
    </message>
    <message>
        <source>Zoom out</source>
        <translation>缩小</translation>
    </message>
    <message>
        <source>Text, plots, lines and markers smaller, now</source>
        <translation>文字、图表、线条和标记立即缩小</translation>
    </message>
    <message>
        <source>Zoom 100%</source>
        <translation>缩放 100%</translation>
    </message>
    <message>
        <source>Text and plots at their normal size</source>
        <translation>文字和图表恢复正常大小</translation>
    </message>
    <message>
        <source>Step &amp;narration</source>
        <translation>步骤解说(&amp;N)</translation>
    </message>
    <message>
        <source>The selected step in words, under the timeline: what each engine computed, read from its cache and moved</source>
        <translation>在时间轴下方用文字说明所选步骤：每个引擎计算了什么、从缓存读取了什么、搬运了多少字节</translation>
    </message>
    <message>
        <source>&amp;Presentation mode</source>
        <translation>演示模式(&amp;P)</translation>
    </message>
    <message>
        <source>Full screen for the panels: the inputs and the status bar hidden</source>
        <translation>面板全屏显示：隐藏输入区和状态栏</translation>
    </message>
    <message>
        <source>Panel &amp;alone</source>
        <translation>单独显示面板(&amp;A)</translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>文件(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Export</source>
        <translation>导出(&amp;E)</translation>
    </message>
    <message>
        <source>&amp;Model</source>
        <translation>模型(&amp;M)</translation>
    </message>
    <message>
        <source>&amp;Lesson</source>
        <translation>课程(&amp;L)</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>视图(&amp;V)</translation>
    </message>
    <message>
        <source>&amp;Language</source>
        <translation>语言(&amp;L)</translation>
    </message>
    <message>
        <source>&amp;Zoom</source>
        <translation>缩放(&amp;Z)</translation>
    </message>
    <message>
        <source>Text, plots, lines and markers larger or smaller, at once</source>
        <translation>文字、图表、线条和标记立即放大或缩小</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>帮助(&amp;H)</translation>
    </message>
    <message>
        <source>at {0} steps/s (the Speed control; 0 runs as fast as possible)</source>
        <translation>按每秒 {0} 步（速度设置；0 表示尽可能快）</translation>
    </message>
    <message>
        <source>from the step times of the last run of this model here</source>
        <translation>根据本机上次运行该模型时的每步耗时</translation>
    </message>
    <message>
        <source>before any run: each step&apos;s bytes read at this machine&apos;s {0:.3g} GB/s or its FLOPs at {1:.3g} GFLOP/s, whichever is slower</source>
        <translation>尚未运行：按本机 {0:.3g} GB/s 读取每步的字节数，或按 {1:.3g} GFLOP/s 计算其浮点运算量，取较慢者</translation>
    </message>
    <message>
        <source>before any run: from the model&apos;s size and this machine&apos;s measured {0:.3g} GFLOP/s</source>
        <translation>尚未运行：根据模型大小和本机实测的 {0:.3g} GFLOP/s</translation>
    </message>
    <message>
        <source>This run will take about {0} ({1}).</source>
        <translation>这次运行大约需要 {0}（{1}）。</translation>
    </message>
    <message>
        <source>&amp;Run</source>
        <translation>运行(&amp;R)</translation>
    </message>
    <message>
        <source>&amp;Pause</source>
        <translation>暂停(&amp;P)</translation>
    </message>
    <message>
        <source>&amp;Step</source>
        <translation>单步(&amp;S)</translation>
    </message>
    <message>
        <source>S&amp;top</source>
        <translation>停止(&amp;T)</translation>
    </message>
    <message>
        <source>Previous step</source>
        <translation>上一步</translation>
    </message>
    <message>
        <source>Next step</source>
        <translation>下一步</translation>
    </message>
    <message>
        <source>Back 10 steps</source>
        <translation>后退 10 步</translation>
    </message>
    <message>
        <source>Forward 10 steps</source>
        <translation>前进 10 步</translation>
    </message>
    <message>
        <source>First step</source>
        <translation>第一步</translation>
    </message>
    <message>
        <source>Newest step (follow the run)</source>
        <translation>最新一步（跟随运行）</translation>
    </message>
    <message>
        <source>Faster</source>
        <translation>加快</translation>
    </message>
    <message>
        <source>Slower</source>
        <translation>减慢</translation>
    </message>
    <message>
        <source>&amp;Resume</source>
        <translation>继续(&amp;R)</translation>
    </message>
</context>
<context>
    <name>MemoryDialog</name>
    <message>
        <source>custom (edit the shape)</source>
        <translation>自定义（编辑形状）</translation>
    </message>
    <message>
        <source>KV cache memory calculator</source>
        <translation>KV Cache 显存计算器</translation>
    </message>
    <message>
        <source>Cache lengths n in tokens, separated by spaces or commas</source>
        <translation>缓存长度 n（token 数），用空格或逗号分隔</translation>
    </message>
    <message>
        <source>Measured</source>
        <translation>实测值</translation>
    </message>
    <message>
        <source>Memory bandwidth; 1 GB = 10^9 bytes (an A100 has about 2000 GB/s)</source>
        <translation>显存带宽；1 GB = 10^9 字节（A100 约 2000 GB/s）</translation>
    </message>
    <message>
        <source>Tokens written by one prefill before decoding: they copy nothing</source>
        <translation>解码之前由一次预填充（prefill）写入的 token：它们不产生复制</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>layers</source>
        <translation>层数</translation>
    </message>
    <message>
        <source>KV heads</source>
        <translation>KV 头数</translation>
    </message>
    <message>
        <source>head_dim</source>
        <translation>head_dim</translation>
    </message>
    <message>
        <source>Shape</source>
        <translation>形状</translation>
    </message>
    <message>
        <source>Lengths (tokens)</source>
        <translation>长度（token 数）</translation>
    </message>
    <message>
        <source>Bandwidth</source>
        <translation>带宽</translation>
    </message>
    <message>
        <source>Paged block size</source>
        <translation>分页块大小</translation>
    </message>
    <message>
        <source>Prompt tokens</source>
        <translation>prompt token 数</translation>
    </message>
    <message>
        <source>window W</source>
        <translation>窗口 W</translation>
    </message>
    <message>
        <source>sinks S</source>
        <translation>sink 数 S</translation>
    </message>
    <message>
        <source>int8 residual R</source>
        <translation>int8 残差 R</translation>
    </message>
    <message>
        <source>Strategies</source>
        <translation>缓存策略</translation>
    </message>
    <message>
        <source>Latent attention (MLA)</source>
        <translation>潜在注意力（MLA）</translation>
    </message>
    <message>
        <source>off</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <source>tokens</source>
        <translation>token 数</translation>
    </message>
    <message>
        <source>KV cache</source>
        <translation>KV Cache</translation>
    </message>
    <message>
        <source>step copy</source>
        <translation>单步复制量</translation>
    </message>
    <message>
        <source>its time</source>
        <translation>耗时</translation>
    </message>
    <message>
        <source>total copy</source>
        <translation>累计复制量</translation>
    </message>
    <message>
        <source>blocks</source>
        <translation>块数</translation>
    </message>
    <message>
        <source>empty slots</source>
        <translation>空槽位</translation>
    </message>
    <message>
        <source>wasted</source>
        <translation>浪费</translation>
    </message>
    <message>
        <source>step copy: what torch.cat copies on the step that brings the cache to n tokens (the n-1 already held, K and V, every layer); total copy: summed over the generation; time: bytes / bandwidth, each byte counted once; blocks and empty slots: a paged cache&apos;s last block</source>
        <translation>单步复制量：使缓存达到 n 个 token 的那一步中 torch.cat 复制的数据（已有的 n-1 个 token，K 和 V，所有层）；累计复制量：整个生成过程之和；耗时：字节数 / 带宽，每个字节只计一次；块数和空槽位：分页缓存的最后一个块</translation>
    </message>
    <message>
        <source>full</source>
        <translation>完整</translation>
    </message>
    <message>
        <source>window</source>
        <translation>window</translation>
    </message>
    <message>
        <source>sinks</source>
        <translation>sinks</translation>
    </message>
    <message>
        <source>int8</source>
        <translation>int8</translation>
    </message>
    <message>
        <source>MLA</source>
        <translation>MLA</translation>
    </message>
    <message>
        <source>Bytes each cache holds at each length, all layers: full = every exact cache; window and sinks hold at most W tokens (W counts the sinks); tova, h2o and knorm hold W tokens too, chosen by a score, and h2o a score per token held besides; snapkv cuts the prompt to W once, then keeps every new token; int8 holds 1 B a value plus a 4 B scale per token and KV head, and R tokens at full precision; MLA holds one latent (kv_lora_rank) plus the rotary key per token per layer, for the chosen published shape</source>
        <translation>各缓存在各长度下保存的字节数（所有层）：full = 所有精确缓存；window 与 sinks 最多保存 W 个 token（W 含 sink）；tova、h2o 与 knorm 同样保存 W 个 token，按分数选择，h2o 另为每个保存的 token 存一个分数；snapkv 把提示词一次性裁剪到 W，之后保留每个新 token；int8 每个值 1 B，外加每个 token 每个 KV 头一个 4 B 缩放因子，另有 R 个全精度 token；MLA 每层每个 token 保存一个潜在向量（kv_lora_rank）加旋转位置键，形状取所选的公开配置</translation>
    </message>
    <message>
        <source>Show the chapter&apos;s copy table (in its own convention)</source>
        <translation>显示本章的复制量表格（按原书的约定）</translation>
    </message>
    <message>
        <source>the chapter&apos;s tiny model: 2 layers, 4 heads of 32, fp32</source>
        <translation>本章的小模型：2 层，4 个 32 维的头，fp32</translation>
    </message>
    <message>
        <source>Qwen3-0.6B&apos;s published config: 28 layers, 16 Q / 8 KV heads, head_dim 128, bf16</source>
        <translation>Qwen3-0.6B 公布的配置：28 层，16 个 Q 头 / 8 个 KV 头，head_dim 128，bf16</translation>
    </message>
    <message>
        <source>Qwen3-0.6B as the chapter assumed it: head_dim 64 (hidden 1024 / 16 heads); not the real model</source>
        <translation>本章假设的 Qwen3-0.6B：head_dim 64（隐藏维 1024 / 16 个头）；并非真实模型</translation>
    </message>
    <message>
        <source>GPT-2 small&apos;s published config: 12 layers, 12 heads of 64, every head cached (no grouped-query attention), fp32</source>
        <translation>GPT-2 small 公布的配置：12 层，12 个 64 维的头，每个头都缓存（没有分组查询注意力），fp32</translation>
    </message>
    <message>
        <source>a Llama-3-70B-class model: 80 layers, 64 Q / 8 KV heads, head_dim 128, bf16</source>
        <translation>Llama-3-70B 级别的模型：80 层，64 个 Q 头 / 8 个 KV 头，head_dim 128，bf16</translation>
    </message>
    <message>
        <source>the chapter prints 56 KB per token for Qwen3-0.6B because it took head_dim 64 (hidden 1024 / 16 heads); the published config sets head_dim 128, so a token holds 114,688 B (112 KiB) in bf16 and every figure in the chapter&apos;s copy table doubles</source>
        <translation>本章给出 Qwen3-0.6B 每个 token 56 KB，因为它取了 head_dim 64（隐藏维 1024 / 16 个头）；公布的配置是 head_dim 128，所以 bf16 下一个 token 占 114,688 B（112 KiB），本章复制表中的每个数字都要翻倍</translation>
    </message>
    <message>
        <source>this is the chapter&apos;s assumed shape (head_dim 64), not Qwen3-0.6B&apos;s published one (head_dim 128)</source>
        <translation>这是本章假设的形状（head_dim 64），不是 Qwen3-0.6B 公布的形状（head_dim 128）</translation>
    </message>
    <message>
        <source>{0} tokens is beyond the model&apos;s context window ({1})</source>
        <translation>{0} 个 token 超出了模型的上下文窗口（{1}）</translation>
    </message>
    <message>
        <source>{0}, 1 thread</source>
        <translation>{0}，1 个线程</translation>
    </message>
    <message>
        <source>{0}, {1} threads</source>
        <translation>{0}，{1} 个线程</translation>
    </message>
    <message>
        <source>the copy bandwidth the trace recorded, {0} (not a read ceiling)</source>
        <translation>轨迹记录的复制带宽，{0}（不是读取上限）</translation>
    </message>
    <message>
        <source>the read ceiling the trace recorded, {0}</source>
        <translation>轨迹记录的读取上限，{0}</translation>
    </message>
    <message>
        <source>this machine&apos;s read ceiling, {0}</source>
        <translation>本机读取上限，{0}</translation>
    </message>
    <message>
        <source>typed</source>
        <translation>手动输入</translation>
    </message>
    <message>
        <source>an A100&apos;s, as the chapter takes it</source>
        <translation>A100 的带宽（按本章的取值）</translation>
    </message>
    <message>
        <source>The bandwidth above is {0}</source>
        <translation>上面的带宽为：{0}</translation>
    </message>
    <message>
        <source>Back to {0}: {1} GB/s</source>
        <translation>恢复为{0}：{1} GB/s</translation>
    </message>
    <message>
        <source>No read ceiling is measured on this machine yet</source>
        <translation>本机尚未测量读取上限</translation>
    </message>
    <message>
        <source>Your own shape, starting from {0}</source>
        <translation>自定义形状，以 {0} 为起点</translation>
    </message>
    <message>
        <source>Sinks ({0}) must be fewer than the window ({1}): the window counts them.</source>
        <translation>Sink 数（{0}）必须少于窗口（{1}）：窗口包含它们。</translation>
    </message>
    <message>
        <source>KV per token per layer: 2 × {0} × {1} × {2} B = {3} B ({4})</source>
        <translation>每个 token 每层的 KV：2 × {0} × {1} × {2} B = {3} B（{4}）</translation>
    </message>
    <message>
        <source>KV per token, {0} layers: {1} B ({2})</source>
        <translation>每个 token 的 KV（{0} 层）：{1} B（{2}）</translation>
    </message>
    <message>
        <source>A decode step reads {0} of weights ({1}, d_model, d_ff, vocab included); from {2} tokens on it reads more K/V than weights: the cache, not the model, then dominates the step</source>
        <translation>每个解码步读取 {0} 权重（{1}，含 d_model、d_ff、词表）；从 {2} 个 token 起，它读取的 K/V 多于权重：此后主导这一步的是缓存，而不是模型</translation>
    </message>
    <message>
        <source>Roofline at {0} positions and {1} GB/s: a decode step reads {2}, {3} FLOP a byte, {4} tokens/s at most; batch 8 reads {5}, {6} FLOP a byte, {7} tokens/s in all</source>
        <translation>屋顶线：{0} 个位置、{1} GB/s 时，一个解码步读取 {2}，每字节 {3} FLOP，最多 {4} tokens/s；批大小 8 时读取 {5}，每字节 {6} FLOP，合计 {7} tokens/s</translation>
    </message>
    <message>
        <source> ({0} GB/s is {1})</source>
        <translation>（{0} GB/s 为{1}）</translation>
    </message>
    <message>
        <source> (this machine&apos;s read ceiling: {0} GB/s at {1} thread(s))</source>
        <translation>（本机读取上限：{0} GB/s，{1} 个线程）</translation>
    </message>
    <message>
        <source> ({0}: {1} GB/s)</source>
        <translation>（{0}为 {1} GB/s）</translation>
    </message>
    <message>
        <source> ({0} GB/s is an A100&apos;s memory bandwidth, as the chapter takes it: no read ceiling is measured on this machine yet)</source>
        <translation>（{0} GB/s 是 A100 的显存带宽，按本章的取值：本机尚未测量读取上限）</translation>
    </message>
    <message>
        <source>Measured: the run shown ({0}) has no decode step yet; a run&apos;s figures come when it ends</source>
        <translation>实测：当前显示的运行（{0}）还没有解码步；运行结束时给出其数字</translation>
    </message>
    <message>
        <source>Measured in the run shown ({0}, {1}): its decode steps over {2} to {3} positions (the prefill left out); allowed: the same steps at batch 1, each reading its bytes at {4} GB/s ({5}):</source>
        <translation>当前显示的运行（{0}，{1}）的实测值：其解码步关注 {2} 至 {3} 个位置（不含 prefill）；允许值：同样的步在批大小 1 时、每步以 {4} GB/s（{5}）读取其字节所能达到的速度：</translation>
    </message>
    <message>
        <source>Measured in the run shown ({0}, {1}): its decode steps over {2} to {3} positions (the prefill left out); the trace records no ceiling or no weights figure to set them against:</source>
        <translation>当前显示的运行（{0}，{1}）的实测值：其解码步关注 {2} 至 {3} 个位置（不含 prefill）；轨迹没有记录可供对照的上限或权重大小：</translation>
    </message>
    <message>
        <source>{0}: {1} tokens/s measured, {2}% of the {3} tokens/s allowed</source>
        <translation>{0}：实测 {1} tokens/s，为允许的 {3} tokens/s 的 {2}%</translation>
    </message>
    <message>
        <source>{0}: {1} tokens/s measured</source>
        <translation>{0}：实测 {1} tokens/s</translation>
    </message>
    <message>
        <source>Window and sinks stop growing at {0} tokens ({1}); int8 holds {2} B per token, {3}% of {4} B.</source>
        <translation>window 与 sinks 在 {0} 个 token 处停止增长（{1}）；int8 每个 token 占 {2} B，为 {4} B 的 {3}%。</translation>
    </message>
    <message>
        <source>tova, h2o and knorm hold the same {0} tokens, chosen by a score; h2o keeps {1} B of score per token held besides ({2} at {0}).</source>
        <translation>tova、h2o 和 knorm 同样保留 {0} 个 token，按分数选择；h2o 另外为每个保留的 token 存 {1} B 的分数（{0} 个时为 {2}）。</translation>
    </message>
    <message>
        <source>snapkv cuts the {0}-token prompt to {1} once, then keeps every new token.</source>
        <translation>snapkv 把 {0} 个 token 的提示词一次性裁剪到 {1} 个，之后保留每个新 token。</translation>
    </message>
    <message>
        <source>snapkv keeps every token: a prompt of {0} tokens is within W, nothing to cut.</source>
        <translation>snapkv 保留每个 token：{0} 个 token 的提示词不超过 W，无需裁剪。</translation>
    </message>
    <message>
        <source>MLA {0}: ({1} + {2}) values x {3} layers = {4} B per token, {5}% of its {6} heads uncompressed.</source>
        <translation>MLA {0}：({1} + {2}) 个值 × {3} 层 = 每个 token {4} B，为其 {6} 个头未压缩时的 {5}%。</translation>
    </message>
    <message>
        <source>give at least one length in tokens</source>
        <translation>请至少给出一个以 token 计的长度</translation>
    </message>
    <message>
        <source>{0} is not a length in tokens (a whole number, at least 1)</source>
        <translation>{0} 不是以 token 计的长度（须为整数，至少为 1）</translation>
    </message>
    <message>
        <source>{0} tokens is more than {1:,}, the most `kvviz memory --tokens` takes</source>
        <translation>{0} 个词元超过了 {1:,}，即 `kvviz memory --tokens` 接受的上限</translation>
    </message>
</context>
<context>
    <name>ModelPresets</name>
    <message>
        <source>the chapter&apos;s shape (2 layers, 4 heads of 32), trained on Python&apos;s docs</source>
        <translation>本章的形状（2 层，4 个 32 维的头），在 Python 文档上训练</translation>
    </message>
    <message>
        <source>the chapter&apos;s exact shape with seeded random weights</source>
        <translation>与本章完全相同的形状，权重为固定种子的随机值</translation>
    </message>
    <message>
        <source>random; 8 layers, hidden 512, 8 heads of 64: big enough for the cat copy to show</source>
        <translation>随机权重；8 层，隐藏维 512，8 个 64 维的头：大到足以看出 cat 复制的开销</translation>
    </message>
    <message>
        <source>random weights in Qwen3-0.6B&apos;s published shape (28 layers, 16 Q / 8 KV heads of 128)</source>
        <translation>Qwen3-0.6B 公布形状的随机权重（28 层，16 个 Q 头 / 8 个 KV 头，每头 128 维）</translation>
    </message>
    <message>
        <source>slow on a CPU: building it and each prefill take seconds; meant for memory figures</source>
        <translation>在 CPU 上很慢：构建模型和每次预填充都要数秒；用于查看内存数字</translation>
    </message>
</context>
<context>
    <name>Narration</name>
    <message>
        <source>{names} and {last}</source>
        <translation>{names} 和 {last}</translation>
    </message>
    <message>
        <source>, </source>
        <translation>、</translation>
    </message>
    <message>
        <source>{kernel} ({engines})</source>
        <translation>{kernel}（{engines}）</translation>
    </message>
    <message>
        <source>Decode kernels: {kernels}; their times differ by kernel as well as by cache.</source>
        <translation>解码内核：{kernels}；它们的耗时差异既来自缓存，也来自内核。</translation>
    </message>
    <message>
        <source>Decode kernel: {kernel}.</source>
        <translation>解码内核：{kernel}。</translation>
    </message>
    <message>
        <source>Every engine decodes with the {kernel} kernel: their times differ by cache alone.</source>
        <translation>每个引擎都用 {kernel} 内核解码：它们的耗时差异只来自缓存。</translation>
    </message>
    <message>
        <source>every engine</source>
        <translation>所有引擎</translation>
    </message>
    <message>
        <source>{engines} computed the K/V of all {n} prompt positions in one pass</source>
        <translation>{engines} 一次性计算了全部 {n} 个 prompt 位置的 K/V</translation>
    </message>
    <message>
        <source>Step {step}, prefill: {work}.</source>
        <translation>第 {step} 步，预填充：{work}。</translation>
    </message>
    <message>
        <source>{engines} computed the K/V of all {n} positions, {again} of them again though unchanged</source>
        <translation>{engines} 计算了全部 {n} 个位置的 K/V，其中 {again} 个并未改变却被重算</translation>
    </message>
    <message>
        <source>{engines} computed {new} new K/V and read {cached} from the cache</source>
        <translation>{engines} 计算了 {new} 个新的 K/V，并从缓存读取了 {cached} 个</translation>
    </message>
    <message>
        <source>Step {step}, decode: {work}.</source>
        <translation>第 {step} 步，解码：{work}。</translation>
    </message>
    <message>
        <source>{work} Eviction: {drops}.</source>
        <translation>{work}驱逐：{drops}。</translation>
    </message>
    <message>
        <source>{work} {wall}</source>
        <translation>{work}{wall}</translation>
    </message>
    <message>
        <source>copied {bytes}</source>
        <translation>复制 {bytes}</translation>
    </message>
    <message>
        <source>wrote {bytes}</source>
        <translation>写入 {bytes}</translation>
    </message>
    <message>
        <source>gathered {bytes}</source>
        <translation>gather 拷贝 {bytes}</translation>
    </message>
    <message>
        <source>undid {bytes}</source>
        <translation>撤销 {bytes}</translation>
    </message>
    <message>
        <source>wrote {bytes} over rejected slots</source>
        <translation>在被拒绝的槽位上覆盖写入 {bytes}</translation>
    </message>
    <message>
        <source>{work} Cache traffic: {moves}.</source>
        <translation>{work}缓存数据搬运：{moves}。</translation>
    </message>
    <message>
        <source>{engine} took accepted draft {i} of {a} from the target forward of step {step}: no forward this step</source>
        <translation>{engine} 取用第 {step} 步目标模型前向中接受的第 {i} 个草稿（共 {a} 个）：本步没有前向</translation>
    </message>
    <message>
        <source>{engine} had no draft to check: one token for one target forward, as plain decoding</source>
        <translation>{engine} 没有可验证的草稿：一次目标模型前向产生一个 token，与普通解码相同</translation>
    </message>
    <message>
        <source> ({bytes} cut from the cache)</source>
        <translation>（从缓存中删去 {bytes}）</translation>
    </message>
    <message>
        <source> (left in place: the next forward writes over them)</source>
        <translation>（原地保留：下一次前向会覆盖它们）</translation>
    </message>
    <message>
        <source>{engine} drafted {p}, the target accepted {a}, {gone} slots rolled back{undone}; {n} tokens for one target forward</source>
        <translation>{engine} 起草了 {p} 个，目标模型接受了 {a} 个，回滚了 {gone} 个槽位{undone}；一次目标模型前向得到 {n} 个 token</translation>
    </message>
    <message>
        <source>{engine} no forward</source>
        <translation>{engine} 无前向</translation>
    </message>
    <message>
        <source>{engine} {a} of {p} drafts kept</source>
        <translation>{engine} 保留了 {p} 个草稿中的 {a} 个</translation>
    </message>
    <message>
        <source>{engine} no draft, 1 new</source>
        <translation>{engine} 无草稿，新增 1 个</translation>
    </message>
    <message>
        <source>{engines} {n} K/V computed, {again} again</source>
        <translation>{engines} 计算了 {n} 个 K/V，其中 {again} 个重算</translation>
    </message>
    <message>
        <source>{engines} {new} new, {cached} read</source>
        <translation>{engines} 新算 {new} 个，读取 {cached} 个</translation>
    </message>
    <message>
        <source>prefill</source>
        <translation>预填充</translation>
    </message>
    <message>
        <source>decode</source>
        <translation>解码</translation>
    </message>
    <message>
        <source>Step {step}, {phase}: {work}.</source>
        <translation>第 {step} 步，{phase}：{work}。</translation>
    </message>
    <message>
        <source>{rate} ({pct}% of the read ceiling)</source>
        <translation>{rate}（读取上限的 {pct}%）</translation>
    </message>
    <message>
        <source>{rate} ({pct}% of the copy bandwidth)</source>
        <translation>{rate}（复制带宽的 {pct}%）</translation>
    </message>
    <message>
        <source>{gbps} GB/s</source>
        <translation>{gbps} GB/s</translation>
    </message>
    <message>
        <source>{rate} ({pct}%)</source>
        <translation>{rate}（{pct}%）</translation>
    </message>
    <message>
        <source>{work} {reads}.</source>
        <translation>{work}{reads}。</translation>
    </message>
    <message>
        <source>{work} Over 100%: read from the CPU&apos;s {cache} cache.</source>
        <translation>{work}超过 100%：读自 CPU 的 {cache} 缓存。</translation>
    </message>
    <message>
        <source>the cache holds {held} of {n} positions</source>
        <translation>缓存保留 {n} 个位置中的 {held} 个</translation>
    </message>
    <message>
        <source>{engine} dropped nothing; {held}</source>
        <translation>{engine} 未丢弃任何位置；{held}</translation>
    </message>
    <message>
        <source>{engine} dropped position {pos}; {held}</source>
        <translation>{engine} 丢弃了位置 {pos}；{held}</translation>
    </message>
    <message>
        <source>{engine} dropped positions {first}-{last}; {held}</source>
        <translation>{engine} 丢弃了位置 {first}-{last}；{held}</translation>
    </message>
    <message>
        <source>{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s</source>
        <translation>{engine} 在 {ms} 内读取了 {weights} 权重和 {kv} K/V，{gbps} GB/s</translation>
    </message>
    <message>
        <source>{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s, {pct}% of this machine&apos;s read ceiling</source>
        <translation>{engine} 在 {ms} 内读取了 {weights} 权重和 {kv} K/V，{gbps} GB/s，为本机读取上限的 {pct}%</translation>
    </message>
    <message>
        <source>{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s, {pct}% of this machine&apos;s copy bandwidth</source>
        <translation>{engine} 在 {ms} 内读取了 {weights} 权重和 {kv} K/V，{gbps} GB/s，为本机复制带宽的 {pct}%</translation>
    </message>
    <message>
        <source>{reads}.</source>
        <translation>{reads}。</translation>
    </message>
    <message>
        <source>{reads} Above 100%: the {bytes} a step reads fit in this CPU&apos;s {cache} cache, which the read ceiling&apos;s probe overflows.</source>
        <translation>{reads}超过 100%：一步读取的 {bytes} 放得进本机 CPU 的 {cache} 缓存，而测读取上限用的矩阵放不下。</translation>
    </message>
    <message>
        <source>; </source>
        <translation>；</translation>
    </message>
    <message>
        <source>up</source>
        <translation>在线</translation>
    </message>
    <message>
        <source>down, retrying with backoff</source>
        <translation>离线，退避重试中</translation>
    </message>
    <message>
        <source>stalled, retrying</source>
        <translation>停滞，重试中</translation>
    </message>
    <message>
        <source>connecting</source>
        <translation>连接中</translation>
    </message>
    <message>
        <source>rank {rank}: following live events from sequence number {seq} (the server&apos;s /metrics has not answered, so no catch-up was asked)</source>
        <translation>rank {rank}：从序号 {seq} 起跟随实时事件（服务器的 /metrics 尚未应答，故未请求补齐）</translation>
    </message>
    <message>
        <source>rank {rank}: following live events only (no replay socket given)</source>
        <translation>rank {rank}：只跟随实时事件（未给出重放套接字）</translation>
    </message>
    <message>
        <source>rank {rank}: following live events only (the replay socket {socket} did not answer)</source>
        <translation>rank {rank}：只跟随实时事件（重放套接字 {socket} 未应答）</translation>
    </message>
    <message>
        <source>rank {rank}: caught up from the replay socket (no batches yet); following live events</source>
        <translation>rank {rank}：已从重放套接字补齐（尚无批次）；跟随实时事件</translation>
    </message>
    <message>
        <source>rank {rank}: caught up from the replay socket ({n} batches, sequence numbers {lo}..{hi}); following live events</source>
        <translation>rank {rank}：已从重放套接字补齐（{n} 批，序号 {lo}..{hi}）；跟随实时事件</translation>
    </message>
    <message>
        <source>rank {rank}: caught up from the replay socket ({n} batches, sequence numbers {lo}..{hi}; batches before {before} are no longer in its buffer); following live events</source>
        <translation>rank {rank}：已从重放套接字补齐（{n} 批，序号 {lo}..{hi}；{before} 之前的批次已不在其缓冲区中）；跟随实时事件</translation>
    </message>
    <message>
        <source>sequence numbers {first}..{last} of rank {rank} missed: catching up from the replay socket</source>
        <translation>rank {rank} 漏收序号 {first}..{last}：正从重放套接字补齐</translation>
    </message>
    <message>
        <source>{n} batches of rank {rank} lost (not in the server&apos;s replay buffer): the mirror may hold blocks the server evicted</source>
        <translation>rank {rank} 丢失 {n} 批（不在服务器的重放缓冲区中）：镜像可能仍持有服务器已驱逐的块</translation>
    </message>
    <message>
        <source>{n} batches of rank {rank} lost (not in the server&apos;s replay buffer)</source>
        <translation>rank {rank} 丢失 {n} 批（不在服务器的重放缓冲区中）</translation>
    </message>
    <message>
        <source>the server restarted ({why}): the mirror starts empty</source>
        <translation>服务器已重启（{why}）：镜像从空开始</translation>
    </message>
    <message>
        <source>the event stream of rank {rank} began again at sequence number 0</source>
        <translation>rank {rank} 的事件流从序号 0 重新开始</translation>
    </message>
    <message>
        <source>its process start time changed</source>
        <translation>其进程启动时间变了</translation>
    </message>
    <message>
        <source>{why}; trying again with backoff</source>
        <translation>{why}；退避后重试</translation>
    </message>
    <message>
        <source>/metrics answered HTTP {code} (an Authorization header? --header)</source>
        <translation>/metrics 应答 HTTP {code}（需要 Authorization 头？--header）</translation>
    </message>
    <message>
        <source>/metrics answered HTTP {code}</source>
        <translation>/metrics 应答 HTTP {code}</translation>
    </message>
    <message>
        <source>/metrics did not answer within {s} s</source>
        <translation>/metrics 在 {s} 秒内未应答</translation>
    </message>
    <message>
        <source>cannot reach {url}: {why}</source>
        <translation>无法连接 {url}：{why}</translation>
    </message>
    <message>
        <source>/metrics is not a vLLM page: {why}</source>
        <translation>/metrics 不是 vLLM 的页面：{why}</translation>
    </message>
    <message>
        <source>{url} answering ({model}, {blocks} blocks of {size} tokens)</source>
        <translation>{url} 已应答（{model}，{blocks} 个块，每块 {size} 个 token）</translation>
    </message>
    <message>
        <source>{url} answering again after {s} s ({model}, {blocks} blocks of {size} tokens)</source>
        <translation>{url} 在 {s} 秒后重新应答（{model}，{blocks} 个块，每块 {size} 个 token）</translation>
    </message>
    <message>
        <source>generating again</source>
        <translation>重新开始生成</translation>
    </message>
    <message>
        <source>waiting for events</source>
        <translation>等待事件</translation>
    </message>
    <message>
        <source>{n} requests running and no token generated for {s} s</source>
        <translation>{n} 个请求在运行，{s} 秒内没有生成 token</translation>
    </message>
    <message>
        <source>the watcher met {what}: {why}; trying again</source>
        <translation>观察器遇到 {what}：{why}；重试</translation>
    </message>
    <message>
        <source>a malformed frame ignored ({why})</source>
        <translation>忽略了一个格式错误的帧（{why}）</translation>
    </message>
    <message>
        <source>a frame of rank {rank} ignored (the server has {ranks})</source>
        <translation>忽略了 rank {rank} 的一帧（服务器有 {ranks} 个）</translation>
    </message>
    <message>
        <source>the server cleared its prefix cache (1 block)</source>
        <translation>服务器清空了前缀缓存（1 个块）</translation>
    </message>
    <message>
        <source>the server cleared its prefix cache ({n} blocks)</source>
        <translation>服务器清空了前缀缓存（{n} 个块）</translation>
    </message>
    <message>
        <source>1 block of a cached prefix reused ({tokens:.0f} prompt tokens not computed again)</source>
        <translation>复用了已缓存前缀的 1 个块（{tokens:.0f} 个提示 token 无需再算）</translation>
    </message>
    <message>
        <source>{blocks:g} blocks of a cached prefix reused ({tokens:.0f} prompt tokens not computed again)</source>
        <translation>复用了已缓存前缀的 {blocks:g} 个块（{tokens:.0f} 个提示 token 无需再算）</translation>
    </message>
    <message>
        <source>1 new branch off cached prefixes ({shared} blocks shared)</source>
        <translation>已缓存前缀上长出 1 个新分支（共享 {shared} 个块）</translation>
    </message>
    <message>
        <source>{n} new branches off cached prefixes ({shared} blocks shared)</source>
        <translation>已缓存前缀上长出 {n} 个新分支（共享 {shared} 个块）</translation>
    </message>
    <message>
        <source>1 block stored</source>
        <translation>存入 1 个块</translation>
    </message>
    <message>
        <source>{n} blocks stored</source>
        <translation>存入 {n} 个块</translation>
    </message>
    <message>
        <source>1 block evicted, least recently used first</source>
        <translation>驱逐 1 个块，最久未用的先走</translation>
    </message>
    <message>
        <source>{n} blocks evicted, least recently used first</source>
        <translation>驱逐 {n} 个块，最久未用的先走</translation>
    </message>
    <message>
        <source>1 request preempted</source>
        <translation>1 个请求被抢占</translation>
    </message>
    <message>
        <source>{n:.0f} requests preempted</source>
        <translation>{n:.0f} 个请求被抢占</translation>
    </message>
    <message>
        <source>no blocks cached</source>
        <translation>没有缓存的块</translation>
    </message>
    <message>
        <source>{n} blocks in 1 chain</source>
        <translation>{n} 个块，1 条链</translation>
    </message>
    <message>
        <source>{n} blocks in {roots} chains</source>
        <translation>{n} 个块，{roots} 条链</translation>
    </message>
    <message>
        <source>a trunk of 1 block with {branches} branches</source>
        <translation>1 个块的主干，{branches} 个分支</translation>
    </message>
    <message>
        <source>a trunk of {n} blocks with {branches} branches</source>
        <translation>{n} 个块的主干，{branches} 个分支</translation>
    </message>
    <message>
        <source>1 more trunk</source>
        <translation>另有 1 条主干</translation>
    </message>
    <message>
        <source>{n} more trunks</source>
        <translation>另有 {n} 条主干</translation>
    </message>
    <message>
        <source>Prefix cache: hash chains (a trunk shared by requests, their branches)</source>
        <translation>前缀缓存：哈希链（请求共享的主干及其分支）</translation>
    </message>
    <message>
        <source>Blocks and counters</source>
        <translation>块与计数</translation>
    </message>
    <message>
        <source>Cache usage and requests</source>
        <translation>缓存占用与请求</translation>
    </message>
    <message>
        <source>Prefix hit rate</source>
        <translation>前缀命中率</translation>
    </message>
    <message>
        <source>TTFT and ITL</source>
        <translation>首 token 延迟与 token 间延迟</translation>
    </message>
    <message>
        <source>{url} rank {rank}</source>
        <translation>{url} rank {rank}</translation>
    </message>
    <message>
        <source>{n} shorter segments not drawn</source>
        <translation>{n} 个较短的段未画出</translation>
    </message>
    <message>
        <source>a segment several chains share (trunk)</source>
        <translation>多条链共享的段（主干）</translation>
    </message>
    <message>
        <source>a segment of one chain (branch)</source>
        <translation>只属一条链的段（分支）</translation>
    </message>
    <message>
        <source>width: blocks; a click shows a segment&apos;s tokens</source>
        <translation>宽度：块数；点击显示一段的 token</translation>
    </message>
    <message>
        <source>{n} blocks, {branches} branches from its end</source>
        <translation>{n} 个块，末端分出 {branches} 个分支</translation>
    </message>
    <message>
        <source>{n} blocks, a branch</source>
        <translation>{n} 个块，一个分支</translation>
    </message>
    <message>
        <source>1 block, {branches} branches from its end</source>
        <translation>1 个块，末端分出 {branches} 个分支</translation>
    </message>
    <message>
        <source>1 block, a branch</source>
        <translation>1 个块，一个分支</translation>
    </message>
    <message>
        <source>(tokens as text need --model)</source>
        <translation>（要把 token 显示为文字需要 --model）</translation>
    </message>
    <message>
        <source>{url}: usage % (solid), running and waiting (dashed, dotted; 100 = {max})</source>
        <translation>{url}：占用 %（实线），运行中与等待中（虚线、点线；100 = {max}）</translation>
    </message>
    <message>
        <source>{url}: prompt tokens found cached, % per sample</source>
        <translation>{url}：在缓存中找到的提示 token，每次采样的 %</translation>
    </message>
    <message>
        <source>{url}: TTFT (solid), ITL (dashed), mean per sample</source>
        <translation>{url}：首 token 延迟（实线），token 间延迟（虚线），每次采样的均值</translation>
    </message>
    <message>
        <source>nothing happened yet</source>
        <translation>尚未发生任何事</translation>
    </message>
    <message>
        <source>Moment</source>
        <translation>时刻</translation>
    </message>
    <message>
        <source>{t} s of {last} s</source>
        <translation>{t} 秒 / {last} 秒</translation>
    </message>
    <message>
        <source>recorded {started}</source>
        <translation>录制于 {started}</translation>
    </message>
    <message>
        <source>, tokens as text by {model}</source>
        <translation>，token 文字由 {model} 解码</translation>
    </message>
    <message>
        <source>, {n} metric samples</source>
        <translation>，{n} 次指标采样</translation>
    </message>
    <message>
        <source>, the recording ends inside a record</source>
        <translation>，录制在一条记录中途结束</translation>
    </message>
    <message>
        <source>cache {usage}, {running} running, {waiting} waiting, {blocks} blocks mirrored, prefix hits {hits}, TTFT {ttft}, ITL {itl}</source>
        <translation>缓存 {usage}，运行中 {running}，等待中 {waiting}，镜像 {blocks} 个块，前缀命中 {hits}，首 token 延迟 {ttft}，token 间延迟 {itl}</translation>
    </message>
    <message>
        <source>{frames:,} frames, {batches:,} batches, {malformed} malformed, {gaps} gaps, {lost} batches lost</source>
        <translation>{frames:,} 帧，{batches:,} 批，{malformed} 个格式错误，{gaps} 处缺口，丢失 {lost} 批</translation>
    </message>
</context>
<context>
    <name>PageAction</name>
    <message>
        <source>Interactive &amp;page (HTML)...</source>
        <translation>交互式网页（HTML）(&amp;P)...</translation>
    </message>
    <message>
        <source>The run as one HTML file with a step slider and every panel; it opens in any browser, with no network</source>
        <translation>把这次运行存为一个 HTML 文件：带步骤滑块和全部面板，可在任何浏览器中打开，无需联网</translation>
    </message>
    <message>
        <source>Export interactive page</source>
        <translation>导出交互式网页</translation>
    </message>
    <message>
        <source>HTML pages (*.html)</source>
        <translation>HTML 网页 (*.html)</translation>
    </message>
    <message>
        <source>Page export</source>
        <translation>网页导出</translation>
    </message>
</context>
<context>
    <name>PanelFrame</name>
    <message>
        <source>Click a point, a row or a token to show its step.</source>
        <translation>单击一个点、一行或一个 token，即可显示它所属的那一步。</translation>
    </message>
    <message>
        <source>Double-click the title to give this panel the whole grid (again to go back).</source>
        <translation>双击标题让此面板占满网格（再次双击恢复）。</translation>
    </message>
</context>
<context>
    <name>PanelGrid</name>
    <message>
        <source>{panel} alone in the grid</source>
        <translation>只显示“{panel}”面板</translation>
    </message>
    <message>
        <source>All panels</source>
        <translation>全部面板</translation>
    </message>
    <message>
        <source>All panels in the grid again</source>
        <translation>重新显示全部面板</translation>
    </message>
    <message>
        <source>Loading the panels...</source>
        <translation>正在加载面板...</translation>
    </message>
    <message>
        <source>No panels registered yet</source>
        <translation>尚未注册任何面板</translation>
    </message>
    <message>
        <source>Every panel is hidden: show some in the View menu</source>
        <translation>所有面板都已隐藏：请在“视图”菜单中选择要显示的面板</translation>
    </message>
    <message>
        <source>{n} panels behind tabs (no room to show them readable):</source>
        <translation>{n} 个面板在标签页后（没有空间清晰显示）：</translation>
    </message>
    <message>
        <source>The window has no room to show these panels readable at this size and zoom, so they wait behind their tabs instead of being squeezed. A larger window, a smaller zoom (View &gt; Zoom) or fewer panels (View) brings them back into the grid.</source>
        <translation>在当前窗口大小和缩放下，没有足够空间清晰显示这些面板，因此它们放在各自的标签页后，而不是被挤小。更大的窗口、更小的缩放（视图 &gt; 缩放）或更少的面板（视图）可让它们回到网格中。</translation>
    </message>
    <message>
        <source>Grid</source>
        <translation>网格</translation>
    </message>
</context>
<context>
    <name>PoolPanel</name>
    <message>
        <source>Block pool</source>
        <translation>块池</translation>
    </message>
    <message>
        <source>{0}: {1} of {2} blocks free</source>
        <translation>{0}：{2} 块中 {1} 块空闲</translation>
    </message>
    <message>
        <source>{0}: {1}/{2} free</source>
        <translation>{0}：{1}/{2} 块空闲</translation>
    </message>
    <message>
        <source>, {0} cached</source>
        <translation>，{0} 块已缓存</translation>
    </message>
    <message>
        <source>Every physical KV block of each scheduler&apos;s pool at this step, coloured by the request holding it and filled as far as it is written. A number is a ref count (a prefix shared by several requests); hatched: cached but free, kept for a prefix hit; grey: free. Hover a block to see its request&apos;s block table (logical → physical).</source>
        <translation>本步各调度器块池中的每个物理 KV 块，按持有它的请求着色，已写入多少就填多少。数字是引用计数（多个请求共享的前缀）；斜线：已缓存但空闲，留给前缀命中；灰色：空闲。鼠标悬停在块上可看到其请求的块表（逻辑 → 物理）。</translation>
    </message>
    <message>
        <source>no run yet</source>
        <translation>尚未运行</translation>
    </message>
    <message>
        <source>used</source>
        <translation>使用中</translation>
    </message>
    <message>
        <source>cached, free</source>
        <translation>已缓存、空闲</translation>
    </message>
    <message>
        <source>free</source>
        <translation>空闲</translation>
    </message>
    <message>
        <source>{0}: block {1}, {2}, {3} of {4} positions written</source>
        <translation>{0}：块 {1}，{2}，已写入 {4} 个位置中的 {3} 个</translation>
    </message>
    <message>
        <source>held by requests {0} (ref count {1})</source>
        <translation>被请求 {0} 持有（引用计数 {1}）</translation>
    </message>
    <message>
        <source>request {0}: {1}</source>
        <translation>请求 {0}：{1}</translation>
    </message>
    <message>
        <source>no blocks</source>
        <translation>没有块</translation>
    </message>
</context>
<context>
    <name>PrefixPanel</name>
    <message>
        <source>Prefix hit rate and blocks stored/removed</source>
        <translation>前缀命中率与块的存入/移除</translation>
    </message>
    <message>
        <source>Above: the share of prompt tokens found in the prefix cache in each sample&apos;s interval (vLLM&apos;s prefix_cache_hits over prefix_cache_queries). Below: blocks stored (solid, up) and removed (dashed, down) in each interval, from the KV events.</source>
        <translation>上：每个采样区间内在前缀缓存中命中的提示 token 占比（vLLM 的 prefix_cache_hits 除以 prefix_cache_queries）。下：每个区间内存入（实线，向上）和移除（虚线，向下）的块数，来自 KV 事件。</translation>
    </message>
    <message>
        <source>prefix hits</source>
        <translation>前缀命中</translation>
    </message>
    <message>
        <source>blocks ±</source>
        <translation>块数 ±</translation>
    </message>
    <message>
        <source>seconds</source>
        <translation>秒</translation>
    </message>
</context>
<context>
    <name>QualityPanel</name>
    <message>
        <source>{engine}: not measured (no exact engine in the run)</source>
        <translation>{engine}：未测量（本次运行没有精确引擎）</translation>
    </message>
    <message>
        <source>{engine}: mean KL {kl} nats, top-1 {agree}</source>
        <translation>{engine}：平均 KL {kl} nat，top-1 {agree}</translation>
    </message>
    <message>
        <source>, its tokens differ from exact from step {0}</source>
        <translation>，自第 {0} 步起其 token 与精确结果不同</translation>
    </message>
    <message>
        <source>KL(exact || engine) per step</source>
        <translation>每步 KL(精确 || 引擎)</translation>
    </message>
    <message>
        <source>KL</source>
        <translation>KL</translation>
    </message>
    <message>
        <source>top-1 disagreements so far</source>
        <translation>至今 top-1 不一致的步数</translation>
    </message>
    <message>
        <source>steps</source>
        <translation>步</translation>
    </message>
    <message>
        <source>Quality</source>
        <translation>质量</translation>
    </message>
    <message>
        <source>What an approximate cache costs in output quality. Each step, the engine is fed the exact engine&apos;s tokens (teacher forcing) and its next-token distribution is compared with the exact one: KL divergence in nats (0: the same distribution) and whether its most likely token is the same. Exact caches (naive, concat, static, paged) score 0 by construction. window and sinks drop old tokens, int8 rounds K and V; the legend also gives the step where the engine&apos;s own output first differs.</source>
        <translation>近似缓存在输出质量上的代价。每一步都给引擎输入精确引擎的 token（teacher forcing），并将其下一个 token 的分布与精确分布比较：KL 散度（单位 nat，0 表示分布相同），以及最可能的 token 是否相同。精确缓存（naive、concat、static、paged）按构造得 0。window 和 sinks 丢弃旧 token，int8 对 K 和 V 取整；图例还给出引擎自身输出首次不同的步。</translation>
    </message>
</context>
<context>
    <name>RecomputePanel</name>
    <message>
        <source>{engine}: {total} K/V computed</source>
        <translation>{engine}：计算了 {total} 次 K/V</translation>
    </message>
    <message>
        <source>times computed</source>
        <translation>计算次数</translation>
    </message>
    <message>
        <source>token position</source>
        <translation>token 位置</translation>
    </message>
    <message>
        <source>end of prompt</source>
        <translation>prompt 结束</translation>
    </message>
    <message>
        <source>Recompute count</source>
        <translation>重算次数</translation>
    </message>
    <message>
        <source>K_i and V_i depend only on token i and the frozen weights, so they never change once computed. Naive decoding recomputes them at every step: the earliest positions have been computed once per step so far. A cache computes each position exactly once. The curve counts one layer (every layer computes the same); the legend counts K/V over all layers (token × layer), as the summary does.</source>
        <translation>K_i 和 V_i 只取决于 token i 和固定不变的权重，所以一旦算出就永远不会改变。朴素解码每一步都重算它们：最早的位置到目前为止每步都被算了一遍。有了缓存，每个位置只算一次。曲线按一层计数（每层算的都一样）；图例与汇总一样，按所有层计数 K/V（token × 层）。</translation>
    </message>
</context>
<context>
    <name>RequestsPanel</name>
    <message>
        <source>Waiting requests and preemptions</source>
        <translation>等待的请求与抢占</translation>
    </message>
    <message>
        <source>Above: requests waiting for room (vLLM&apos;s num_requests_waiting). Below: requests preempted in each sample&apos;s interval (the change of num_preemptions), a line per server.</source>
        <translation>上：等待空间的请求数（vLLM 的 num_requests_waiting）。下：每个采样区间内被抢占的请求数（num_preemptions 的变化量），每个服务器一条线。</translation>
    </message>
    <message>
        <source>waiting</source>
        <translation>等待</translation>
    </message>
    <message>
        <source>preempted</source>
        <translation>被抢占</translation>
    </message>
    <message>
        <source>seconds</source>
        <translation>秒</translation>
    </message>
</context>
<context>
    <name>RunForm</name>
    <message>
        <source>Prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>Type a prompt, then Run (Ctrl+R)</source>
        <translation>输入 prompt，然后运行 (Ctrl+R)</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <source>Dtype</source>
        <translation>数据类型</translation>
    </message>
    <message>
        <source>auto</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>auto: bf16 on CUDA, else the model&apos;s own dtype</source>
        <translation>自动：CUDA 上用 bf16，否则用模型自身的数据类型</translation>
    </message>
    <message>
        <source>Engines</source>
        <translation>引擎</translation>
    </message>
    <message>
        <source>loading PyTorch...</source>
        <translation>正在加载 PyTorch...</translation>
    </message>
    <message>
        <source>Decode kernel</source>
        <translation>解码内核</translation>
    </message>
    <message>
        <source>What runs every engine&apos;s decode steps, one kernel for the whole run, so that the engines differ by their cache alone</source>
        <translation>运行每个引擎解码步的代码，整次运行只用一个内核，这样各引擎之间只有缓存不同</translation>
    </message>
    <message>
        <source>Compare kernel</source>
        <translation>对比内核</translation>
    </message>
    <message>
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <source>A kernel comparison: every engine also under this kernel, as a lane of its own (“static · C step”) in a shade of the engine&apos;s colour: same cache, another kernel</source>
        <translation>内核对比：每个引擎也在这个内核下运行，各成一条通道（“static · C step”），颜色是该引擎颜色的深浅变化：同一个缓存，换一个内核</translation>
    </message>
    <message>
        <source>Repeat</source>
        <translation>重复</translation>
    </message>
    <message>
        <source> ×</source>
        <translation> ×</translation>
    </message>
    <message>
        <source>Run the comparison this many times: the summary gives each engine&apos;s median time and the spread of the runs, as kvviz bench does</source>
        <translation>把这次对比运行这么多次：汇总给出每个引擎的中位时间和各次运行的离散程度，与 kvviz bench 相同</translation>
    </message>
    <message>
        <source>New tokens</source>
        <translation>新 token 数</translation>
    </message>
    <message>
        <source>Block size</source>
        <translation>块大小</translation>
    </message>
    <message>
        <source>Tokens per block of the paged cache</source>
        <translation>分页缓存每个块容纳的 token 数</translation>
    </message>
    <message>
        <source>Window (W)</source>
        <translation>窗口 (W)</translation>
    </message>
    <message>
        <source>window and sinks caches: tokens kept, sinks included</source>
        <translation>window 与 sinks 缓存：保留的 token 数（含 sink）</translation>
    </message>
    <message>
        <source>Sinks (S)</source>
        <translation>Sink 数 (S)</translation>
    </message>
    <message>
        <source>sinks cache: the first tokens, kept for ever (fewer than W)</source>
        <translation>sinks 缓存：永久保留的开头 token（少于 W）</translation>
    </message>
    <message>
        <source>Residual (R)</source>
        <translation>残差 (R)</translation>
    </message>
    <message>
        <source>int8 cache: the newest tokens kept in full precision</source>
        <translation>int8 缓存：以全精度保留的最新 token</translation>
    </message>
    <message>
        <source>off</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Draft tokens k</source>
        <translation>草稿 token 数 k</translation>
    </message>
    <message>
        <source>speculative engines: tokens drafted per round, checked by the model in one forward</source>
        <translation>投机解码引擎：每轮起草的 token 数，由模型在一次前向中验证</translation>
    </message>
    <message>
        <source>Rollback</source>
        <translation>回滚</translation>
    </message>
    <message>
        <source>how rejected drafts&apos; K/V are undone: overwrite moves the position back and the next round writes over them (gpt-fast, vLLM); crop cuts them from the cache (transformers, SGLang)</source>
        <translation>被拒绝草稿的 K/V 如何撤销：overwrite 把位置退回，由下一轮覆盖写入（gpt-fast、vLLM）；crop 把它们从缓存中删去（transformers、SGLang）</translation>
    </message>
    <message>
        <source>Sampling</source>
        <translation>采样</translation>
    </message>
    <message>
        <source>Greedy (always the most likely token)</source>
        <translation>贪心（总是选概率最高的 token）</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation>Top-k</translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation>Top-p</translation>
    </message>
    <message>
        <source>1.00 keeps every token</source>
        <translation>1.00 表示保留所有 token</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>随机种子</translation>
    </message>
    <message>
        <source>Attention</source>
        <translation>注意力</translation>
    </message>
    <message>
        <source>layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>head</source>
        <translation>头</translation>
    </message>
    <message>
        <source>Which layer and head the engines copy attention weights from (applies to the next run)</source>
        <translation>引擎从哪一层、哪个头复制注意力权重（下次运行时生效）</translation>
    </message>
    <message>
        <source>Run (Ctrl+R)</source>
        <translation>运行 (Ctrl+R)</translation>
    </message>
    <message>
        <source>The saved run&apos;s settings, read-only while it is shown.</source>
        <translation>已保存运行的设置，显示期间为只读。</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>编辑</translation>
    </message>
    <message>
        <source>Change the settings for a new run (the saved run stays shown)</source>
        <translation>为新的运行修改设置（已保存的运行仍然显示）</translation>
    </message>
    <message>
        <source>auto ({0})</source>
        <translation>自动（{0}）</translation>
    </message>
    <message>
        <source>checkpoint folder</source>
        <translation>检查点文件夹</translation>
    </message>
    <message>
        <source>Starting: loading PyTorch and the model list...</source>
        <translation>正在启动：加载 PyTorch 和模型列表...</translation>
    </message>
    <message>
        <source>Type a prompt.</source>
        <translation>请输入 prompt。</translation>
    </message>
    <message>
        <source>Choose a model.</source>
        <translation>请选择模型。</translation>
    </message>
    <message>
        <source>This model is not available.</source>
        <translation>该模型不可用。</translation>
    </message>
    <message>
        <source>Check at least one engine.</source>
        <translation>请至少勾选一个引擎。</translation>
    </message>
    <message>
        <source>Sinks ({0}) must be fewer than the window ({1}): the window counts them.</source>
        <translation>Sink 数（{0}）必须少于窗口（{1}）：窗口包含它们。</translation>
    </message>
    <message>
        <source>Temperature must be above 0 when sampling (tick Greedy for the most likely token).</source>
        <translation>采样时温度必须大于 0（要总选概率最高的 token，请勾选“贪心”）。</translation>
    </message>
    <message>
        <source>Top-p must be above 0 (1.00 keeps every token).</source>
        <translation>Top-p 必须大于 0（1.00 表示保留所有 token）。</translation>
    </message>
    <message>
        <source>Sampling: {0}</source>
        <translation>采样：{0}</translation>
    </message>
    <message>
        <source>Compare the decode kernel with another kernel (both are {0}).</source>
        <translation>请把解码内核与另一个内核对比（两者都是 {0}）。</translation>
    </message>
    <message>
        <source>The prompt ({0} tokens) + new tokens ({1}) = {2} exceeds the model&apos;s context of {3}.</source>
        <translation>prompt（{0} 个 token）+ 新 token（{1} 个）= {2}，超出了模型的上下文长度 {3}。</translation>
    </message>
    <message>
        <source>New tokens ({0}) must leave room for the prompt in the model&apos;s context of {1}.</source>
        <translation>新 token 数（{0}）必须为 prompt 留出空间，模型的上下文长度为 {1}。</translation>
    </message>
    <message>
        <source>Window ({0}) is larger than the run, which stores {1} tokens: it would drop nothing.</source>
        <translation>窗口（{0}）大于本次运行存储的 {1} 个 token：它不会丢弃任何内容。</translation>
    </message>
    <message>
        <source>Residual ({0}) is larger than the run, which stores {1} tokens.</source>
        <translation>残差（{0}）大于本次运行存储的 {1} 个 token。</translation>
    </message>
    <message>
        <source>Attention layer must be below {0}.</source>
        <translation>注意力层必须小于 {0}。</translation>
    </message>
    <message>
        <source>Attention head must be below {0}.</source>
        <translation>注意力头必须小于 {0}。</translation>
    </message>
</context>
<context>
    <name>RunWorker</name>
    <message>
        <source>{0}: trained weights not found in {1} (run `kvviz train --out {1}`)</source>
        <translation>{0}：在 {1} 中找不到训练好的权重（请运行 `kvviz train --out {1}`）</translation>
    </message>
    <message>
        <source>choose at least one engine</source>
        <translation>请至少选择一个引擎</translation>
    </message>
    <message>
        <source>attention layer {0} is outside 0..{1}</source>
        <translation>注意力层 {0} 不在 0..{1} 范围内</translation>
    </message>
    <message>
        <source>attention head {0} is outside 0..{1}</source>
        <translation>注意力头 {0} 不在 0..{1} 范围内</translation>
    </message>
    <message>
        <source>naive: attention weights not captured, a run this long would hold more than {0} MiB of them</source>
        <translation>naive：未记录注意力权重，这么长的运行需要超过 {0} MiB 来保存它们</translation>
    </message>
    <message>
        <source>the repeats gave different tokens: their times are not of the same work</source>
        <translation>各次重复生成的词元不同：它们的时间不是同一份工作的时间</translation>
    </message>
    <message>
        <source>out of memory; {0}</source>
        <translation>内存不足；{0}</translation>
    </message>
    <message>
        <source>the engine process did not answer Stop within {0:g} s and was ended</source>
        <translation>引擎进程在 {0:g} 秒内未响应“停止”，已将其结束</translation>
    </message>
    <message>
        <source>the engine process had ended (exit code {0})</source>
        <translation>引擎进程已结束（退出码 {0}）</translation>
    </message>
    <message>
        <source>the engine process was stopped (SIGSTOP) while idle and was ended</source>
        <translation>引擎进程在空闲时被暂停（SIGSTOP），已将其结束</translation>
    </message>
    <message>
        <source>{0}; a new one was started and the model loaded again</source>
        <translation>{0}；已启动新的引擎进程并重新加载模型</translation>
    </message>
    <message>
        <source>the engine process was ended by Stop while it started</source>
        <translation>引擎进程在启动时被“停止”结束</translation>
    </message>
    <message>
        <source>the engine process did not start within {0:g} s and was ended</source>
        <translation>引擎进程未在 {0:g} 秒内启动，已将其结束</translation>
    </message>
    <message>
        <source>the engine process did not start (exit code {0})</source>
        <translation>引擎进程未能启动（退出码 {0}）</translation>
    </message>
    <message>
        <source>the engine process ended unexpectedly (exit code {0}{1})</source>
        <translation>引擎进程意外退出（退出码 {0}{1}）</translation>
    </message>
    <message>
        <source>: killed, perhaps out of memory</source>
        <translation>：被终止，可能是内存不足</translation>
    </message>
</context>
<context>
    <name>ScenesDialog</name>
    <message>
        <source>{0} is a built-in lesson: save a copy of it elsewhere and edit the copy</source>
        <translation>{0} 是内置课程：请先在别处保存一份副本，再编辑副本</translation>
    </message>
    <message>
        <source>Rename scene</source>
        <translation>重命名场景</translation>
    </message>
    <message>
        <source>The title shown in English (required)</source>
        <translation>英文标题（必填）</translation>
    </message>
    <message>
        <source>The title shown in Chinese (empty: the English one is shown)</source>
        <translation>中文标题（留空则显示英文标题）</translation>
    </message>
    <message>
        <source>English:</source>
        <translation>英文：</translation>
    </message>
    <message>
        <source>Chinese:</source>
        <translation>中文：</translation>
    </message>
    <message>
        <source>Edit scenes: {0}</source>
        <translation>编辑场景：{0}</translation>
    </message>
    <message>
        <source>The lesson&apos;s scenes in the order PageDown presents them</source>
        <translation>课程的场景，按 PageDown 放映的顺序排列</translation>
    </message>
    <message>
        <source>Up</source>
        <translation>上移</translation>
    </message>
    <message>
        <source>Present the selected scene one earlier</source>
        <translation>将所选场景提前一位放映</translation>
    </message>
    <message>
        <source>Down</source>
        <translation>下移</translation>
    </message>
    <message>
        <source>Present the selected scene one later</source>
        <translation>将所选场景推后一位放映</translation>
    </message>
    <message>
        <source>Rename...</source>
        <translation>重命名...</translation>
    </message>
    <message>
        <source>The selected scene&apos;s title in English and Chinese</source>
        <translation>所选场景的中英文标题</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Take the selected scene out of the lesson</source>
        <translation>从课程中删除所选场景</translation>
    </message>
    <message>
        <source>Save</source>
        <translation>保存</translation>
    </message>
    <message>
        <source>Write the lesson file with these scenes</source>
        <translation>用这些场景写入课程文件</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Close; unsaved changes are asked about</source>
        <translation>关闭；若有未保存的修改会先询问</translation>
    </message>
    <message>
        <source>(was {0})</source>
        <translation>（原第 {0} 个）</translation>
    </message>
    <message>
        <source>{0}: {1} scene in {2}{3}</source>
        <translation>{0}：{2} 中的 {1} 个场景{3}</translation>
    </message>
    <message>
        <source>{0}: {1} scenes in {2}{3}</source>
        <translation>{0}：{2} 中的 {1} 个场景{3}</translation>
    </message>
    <message>
        <source> (not saved)</source>
        <translation>（未保存）</translation>
    </message>
    <message>
        <source>a scene&apos;s title needs English text</source>
        <translation>场景标题需要英文文本</translation>
    </message>
    <message>
        <source>Save the changed scenes to {0}?</source>
        <translation>将修改后的场景保存到 {0}？</translation>
    </message>
    <message>
        <source>Edit scenes</source>
        <translation>编辑场景</translation>
    </message>
    <message>
        <source>Lessons (*.toml *.json)</source>
        <translation>课程 (*.toml *.json)</translation>
    </message>
</context>
<context>
    <name>SeriesPanel</name>
    <message>
        <source>log scale</source>
        <translation>对数坐标</translation>
    </message>
    <message>
        <source>step</source>
        <translation>步</translation>
    </message>
</context>
<context>
    <name>ServeExports</name>
    <message>
        <source>nothing to export: run a workload or open a serve record first</source>
        <translation>没有可导出的内容：先运行一个负载，或打开一份服务记录</translation>
    </message>
    <message>
        <source>View as PNG...</source>
        <translation>视图导出为 PNG...</translation>
    </message>
    <message>
        <source>View as SVG...</source>
        <translation>视图导出为 SVG...</translation>
    </message>
    <message>
        <source>Run as a page (HTML)...</source>
        <translation>运行导出为网页（HTML）...</translation>
    </message>
    <message>
        <source>Serve record (JSON)...</source>
        <translation>服务记录（JSON）...</translation>
    </message>
    <message>
        <source>Steps (CSV)...</source>
        <translation>各步（CSV）...</translation>
    </message>
    <message>
        <source>Steps as GIF or MP4...</source>
        <translation>各步导出为 GIF 或 MP4...</translation>
    </message>
    <message>
        <source>Export</source>
        <translation>导出</translation>
    </message>
    <message>
        <source>saved {0}</source>
        <translation>已保存 {0}</translation>
    </message>
</context>
<context>
    <name>ServeForm</name>
    <message>
        <source>one batch padded to its longest prompt, run until its longest request ends</source>
        <translation>一个批次，填充到最长的提示，一直运行到最长的请求结束</translation>
    </message>
    <message>
        <source>a finished request leaves, a waiting one joins at the next step</source>
        <translation>完成的请求离开，等待的请求在下一步加入</translation>
    </message>
    <message>
        <source>continuous, with a token budget per step shared by decodes and prefill chunks</source>
        <translation>连续批处理，每步有 token 预算，由解码和预填充分块共享</translation>
    </message>
    <message>
        <source>continuous over one block pool; the newest request is preempted when it runs out</source>
        <translation>在一个块池上连续批处理；块用完时抢占最新的请求</translation>
    </message>
    <message>
        <source>paged, with full blocks shared by a chained hash (prefix caching)</source>
        <translation>分页，满块按链式哈希共享（前缀缓存）</translation>
    </message>
    <message>
        <source>each request reserves its maximum length up front: the chapter&apos;s fragmentation</source>
        <translation>每个请求预先申请其最大长度：本章所说的碎片</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Requests</source>
        <translation>请求</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>提示</translation>
    </message>
    <message>
        <source>new</source>
        <translation>新增</translation>
    </message>
    <message>
        <source>arrives</source>
        <translation>到达</translation>
    </message>
    <message>
        <source>new tokens to generate</source>
        <translation>要生成的新 token 数</translation>
    </message>
    <message>
        <source>the scheduler step at which the request arrives</source>
        <translation>请求到达的调度步</translation>
    </message>
    <message>
        <source>Add</source>
        <translation>添加</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Load preset</source>
        <translation>载入预设</translation>
    </message>
    <message>
        <source>Replace the table with a preset workload</source>
        <translation>用预设负载替换表格</translation>
    </message>
    <message>
        <source>Schedulers</source>
        <translation>调度器</translation>
    </message>
    <message>
        <source>vLLM beside</source>
        <translation>vLLM 对照</translation>
    </message>
    <message>
        <source>Max batch</source>
        <translation>最大批次</translation>
    </message>
    <message>
        <source>Pool blocks</source>
        <translation>池中块数</translation>
    </message>
    <message>
        <source>Token budget</source>
        <translation>token 预算</translation>
    </message>
    <message>
        <source>Block size</source>
        <translation>块大小</translation>
    </message>
    <message>
        <source>most requests running in one step</source>
        <translation>一步中同时运行的最多请求数</translation>
    </message>
    <message>
        <source>physical KV blocks in the shared pool</source>
        <translation>共享池中的物理 KV 块数</translation>
    </message>
    <message>
        <source>most tokens one step computes (chunked prefill)</source>
        <translation>一步最多计算的 token 数（分块预填充）</translation>
    </message>
    <message>
        <source>tokens per KV block</source>
        <translation>每个 KV 块的 token 数</translation>
    </message>
    <message>
        <source>Run (Ctrl+R)</source>
        <translation>运行 (Ctrl+R)</translation>
    </message>
    <message>
        <source>loading the model list...</source>
        <translation>正在加载模型列表...</translation>
    </message>
    <message>
        <source>vLLM runs the same requests in its own process (35-50 s to start on a CPU) and reports each step beside the schedulers: its settings follow prefix if ticked (prefix caching on), else chunked, paged or continuous</source>
        <translation>vLLM 在自己的进程中运行同样的请求（在 CPU 上启动需 35-50 秒），并在各调度器旁报告每一步：若勾选了 prefix，它的设置随 prefix（开启前缀缓存），否则依次随 chunked、paged 或 continuous</translation>
    </message>
    <message>
        <source>the model list is loading...</source>
        <translation>模型列表正在加载...</translation>
    </message>
    <message>
        <source>choose a model</source>
        <translation>请选择模型</translation>
    </message>
    <message>
        <source>add at least one request</source>
        <translation>至少添加一个请求</translation>
    </message>
    <message>
        <source>at most {0} requests</source>
        <translation>最多 {0} 个请求</translation>
    </message>
    <message>
        <source>request {0}: the prompt is empty</source>
        <translation>请求 {0}：提示为空</translation>
    </message>
    <message>
        <source>request {0}: new tokens must be at least 1</source>
        <translation>请求 {0}：新 token 数至少为 1</translation>
    </message>
    <message>
        <source>request {0}: the arrival step must be 0 or more</source>
        <translation>请求 {0}：到达步必须大于等于 0</translation>
    </message>
    <message>
        <source>tick at least one scheduler</source>
        <translation>至少勾选一个调度器</translation>
    </message>
    <message>
        <source>the token budget is smaller than one block</source>
        <translation>token 预算小于一个块</translation>
    </message>
    <message>
        <source>not a list of 1 to {0} requests</source>
        <translation>不是含 1 到 {0} 个请求的列表</translation>
    </message>
    <message>
        <source>request {0} is not [prompt, new tokens, arrival]</source>
        <translation>请求 {0} 不是 [提示词, 新词元数, 到达时间]</translation>
    </message>
    <message>
        <source>vLLM&apos;s CPU attention needs blocks of a multiple of {0} tokens, not {1}</source>
        <translation>vLLM 的 CPU 注意力要求块大小为 {0} 个 token 的倍数，而不是 {1}</translation>
    </message>
    <message>
        <source>vLLM&apos;s CPU attention takes head sizes {0}; the model&apos;s is {1}</source>
        <translation>vLLM 的 CPU 注意力支持的头维度为 {0}；该模型的是 {1}</translation>
    </message>
</context>
<context>
    <name>ServeHook</name>
    <message>
        <source>Run the compare view first: Continue serves its text as the first turn of a chat</source>
        <translation>请先在对比视图中运行：“继续”会把它的文本作为对话的第一轮来服务</translation>
    </message>
    <message>
        <source>Continue in the Serve view</source>
        <translation>在服务视图中继续</translation>
    </message>
    <message>
        <source>Your next message (the text so far is re-sent before it):</source>
        <translation>你的下一条消息（之前的全部文本会在它前面重新发送）：</translation>
    </message>
    <message>
        <source>Why does the cache grow?</source>
        <translation>缓存为什么会增长？</translation>
    </message>
</context>
<context>
    <name>ServeNarration</name>
    <message>
        <source>request {0} finished and left</source>
        <translation>请求 {0} 完成并离开</translation>
    </message>
    <message>
        <source>request {0} joined and reused {1} blocks of a cached prefix ({2} tokens not prefilled)</source>
        <translation>请求 {0} 加入，复用了已缓存前缀的 {1} 个块（{2} 个 token 无需预填充）</translation>
    </message>
    <message>
        <source>request {0} joined</source>
        <translation>请求 {0} 加入</translation>
    </message>
    <message>
        <source>request {0} was preempted ({1} blocks freed, {2} positions to compute again)</source>
        <translation>请求 {0} 被抢占（释放 {1} 个块，{2} 个位置需要重新计算）</translation>
    </message>
    <message>
        <source>{0} padding slots computed and thrown away</source>
        <translation>{0} 个填充槽位算了又扔掉</translation>
    </message>
    <message>
        <source>{0} idle slots of finished requests</source>
        <translation>已完成请求的 {0} 个空闲槽位</translation>
    </message>
    <message>
        <source>nothing to run</source>
        <translation>没有可运行的</translation>
    </message>
    <message>
        <source>{0} of {1} blocks free</source>
        <translation>{1} 块中 {0} 块空闲</translation>
    </message>
    <message>
        <source> ({0} more cached)</source>
        <translation>（另有 {0} 块已缓存）</translation>
    </message>
    <message>
        <source>{0} left</source>
        <translation>{0} 离开</translation>
    </message>
    <message>
        <source>{0} joined</source>
        <translation>{0} 加入</translation>
    </message>
    <message>
        <source>r{0} joined, {1} blocks cached</source>
        <translation>r{0} 加入，{1} 块已缓存</translation>
    </message>
    <message>
        <source>{0} preempted</source>
        <translation>{0} 被抢占</translation>
    </message>
    <message>
        <source>{0} padding</source>
        <translation>{0} 个填充</translation>
    </message>
    <message>
        <source>{0} idle</source>
        <translation>{0} 个空闲</translation>
    </message>
    <message>
        <source>{0}/{1} free</source>
        <translation>{0}/{1} 块空闲</translation>
    </message>
    <message>
        <source>{0} running</source>
        <translation>{0} 个运行中</translation>
    </message>
    <message>
        <source>{0} waiting</source>
        <translation>{0} 个等待</translation>
    </message>
    <message>
        <source>{0} blocks in use</source>
        <translation>{0} 个块在用</translation>
    </message>
    <message>
        <source>{0} prompt tokens from its cache</source>
        <translation>{0} 个提示 token 来自其缓存</translation>
    </message>
    <message>
        <source>{0} run</source>
        <translation>{0} 运行</translation>
    </message>
    <message>
        <source>{0} wait</source>
        <translation>{0} 等待</translation>
    </message>
    <message>
        <source>{0} blocks</source>
        <translation>{0} 块</translation>
    </message>
    <message>
        <source>{0} cached</source>
        <translation>{0} 已缓存</translation>
    </message>
    <message>
        <source>; </source>
        <translation>；</translation>
    </message>
    <message>
        <source>vLLM failed: {0}</source>
        <translation>vLLM 失败：{0}</translation>
    </message>
    <message>
        <source>vLLM: starting, {0:.0f} s waited</source>
        <translation>vLLM：启动中，已等待 {0:.0f} 秒</translation>
    </message>
    <message>
        <source>vLLM: done after {0} steps</source>
        <translation>vLLM：{0} 步后完成</translation>
    </message>
    <message>
        <source>vLLM: done</source>
        <translation>vLLM：完成</translation>
    </message>
    <message>
        <source>vLLM, step {0}: nothing to run</source>
        <translation>vLLM，第 {0} 步：没有可运行的</translation>
    </message>
    <message>
        <source>vLLM {0}: idle</source>
        <translation>vLLM 第 {0} 步：空闲</translation>
    </message>
    <message>
        <source>, </source>
        <translation>，</translation>
    </message>
    <message>
        <source>{0}: {1}</source>
        <translation>{0}：{1}</translation>
    </message>
    <message>
        <source>vLLM, step {0}: {1}</source>
        <translation>vLLM，第 {0} 步：{1}</translation>
    </message>
    <message>
        <source>vLLM {0}: {1}</source>
        <translation>vLLM 第 {0} 步：{1}</translation>
    </message>
    <message>
        <source>vLLM: starting, {0:.0f} s waited (35-50 s on a CPU); the schedulers wait for it</source>
        <translation>vLLM：启动中，已等待 {0:.0f} 秒（在 CPU 上需 35-50 秒）；各调度器等它就绪</translation>
    </message>
    <message>
        <source>{0}: done after {1} steps</source>
        <translation>{0}：{1} 步后完成</translation>
    </message>
    <message>
        <source>{0}: done</source>
        <translation>{0}：完成</translation>
    </message>
    <message>
        <source>{0}, step {1}: {2}</source>
        <translation>{0}，第 {1} 步：{2}</translation>
    </message>
    <message>
        <source>{0} {1}: {2}</source>
        <translation>{0} 第 {1} 步：{2}</translation>
    </message>
    <message>
        <source>.  </source>
        <translation>。</translation>
    </message>
</context>
<context>
    <name>ServeTransport</name>
    <message>
        <source>Step</source>
        <translation>步</translation>
    </message>
    <message>
        <source>Scrub through the recorded steps (Left/Right, Home/End)</source>
        <translation>拖动浏览已记录的各步（左/右、Home/End）</translation>
    </message>
    <message>
        <source>no steps yet: Run (Ctrl+R)</source>
        <translation>还没有步：运行 (Ctrl+R)</translation>
    </message>
    <message>
        <source>step {0} / {1}</source>
        <translation>第 {0} / {1} 步</translation>
    </message>
    <message>
        <source>request {0}</source>
        <translation>请求 {0}</translation>
    </message>
</context>
<context>
    <name>ServeWindow</name>
    <message>
        <source>kvviz: serving many requests</source>
        <translation>kvviz：同时服务多个请求</translation>
    </message>
    <message>
        <source>Open serve record...</source>
        <translation>打开服务记录...</translation>
    </message>
    <message>
        <source>&amp;Close</source>
        <translation>关闭(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;Quit kvviz</source>
        <translation>退出 kvviz(&amp;Q)</translation>
    </message>
    <message>
        <source>Serve the workload with every ticked scheduler, in lockstep (Ctrl+R)</source>
        <translation>用每个勾选的调度器同步服务该负载 (Ctrl+R)</translation>
    </message>
    <message>
        <source>Workload</source>
        <translation>负载</translation>
    </message>
    <message>
        <source>no worker: this window only replays</source>
        <translation>没有工作线程：此窗口只能回放</translation>
    </message>
    <message>
        <source>replaying {0}</source>
        <translation>正在回放 {0}</translation>
    </message>
    <message>
        <source>Open serve record</source>
        <translation>打开服务记录</translation>
    </message>
    <message>
        <source>Serve records (*.json)</source>
        <translation>服务记录 (*.json)</translation>
    </message>
</context>
<context>
    <name>SessionFile</name>
    <message>
        <source>no panel is shown: a session keeps the panels shown (View, at least one)</source>
        <translation>没有显示任何面板：会话保存的是显示中的面板（在“视图”中至少选择一个）</translation>
    </message>
    <message>
        <source>a run is going: stop it (its steps stay) before saving the session</source>
        <translation>运行仍在进行：请先停止（已有步骤会保留）再保存会话</translation>
    </message>
    <message>
        <source>a run is going: stop it before opening a session</source>
        <translation>运行仍在进行：请先停止再打开会话</translation>
    </message>
    <message>
        <source>Save session</source>
        <translation>保存会话</translation>
    </message>
    <message>
        <source>kvviz sessions (*.json)</source>
        <translation>kvviz 会话 (*.json)</translation>
    </message>
    <message>
        <source>Session saved to {0}</source>
        <translation>会话已保存到 {0}</translation>
    </message>
    <message>
        <source>Open session</source>
        <translation>打开会话</translation>
    </message>
    <message>
        <source>Session opened from {0}</source>
        <translation>已从 {0} 打开会话</translation>
    </message>
</context>
<context>
    <name>SettingsFile</name>
    <message>
        <source>settings {0}: {1}={2} refused ({3}); the default is used</source>
        <translation>设置 {0}：{1}={2} 被拒绝（{3}）；使用默认值</translation>
    </message>
    <message>
        <source>not a whole number</source>
        <translation>不是整数</translation>
    </message>
    <message>
        <source>not a finite number</source>
        <translation>不是有限数</translation>
    </message>
    <message>
        <source>outside {0}..{1}</source>
        <translation>超出 {0}..{1}</translation>
    </message>
    <message>
        <source>must be more than {0:g}</source>
        <translation>必须大于 {0:g}</translation>
    </message>
    <message>
        <source>not true or false</source>
        <translation>不是 true 或 false</translation>
    </message>
    <message>
        <source>not text</source>
        <translation>不是文本</translation>
    </message>
    <message>
        <source>{0:,} characters, more than {1:,}</source>
        <translation>{0:,} 个字符，多于 {1:,}</translation>
    </message>
    <message>
        <source>holds a NUL</source>
        <translation>含有 NUL 字符</translation>
    </message>
    <message>
        <source>not the bytes Qt saves</source>
        <translation>不是 Qt 保存的字节</translation>
    </message>
    <message>
        <source>{0} (and {1} more on stderr)</source>
        <translation>{0}（另有 {1} 条在 stderr）</translation>
    </message>
</context>
<context>
    <name>ShortcutsDialog</name>
    <message>
        <source>Keyboard shortcuts</source>
        <translation>键盘快捷键</translation>
    </message>
    <message>
        <source>Action</source>
        <translation>操作</translation>
    </message>
    <message>
        <source>Keys</source>
        <translation>按键</translation>
    </message>
    <message>
        <source>Show a step</source>
        <translation>显示某一步</translation>
    </message>
    <message>
        <source>click a point, a row or a token in a panel</source>
        <translation>在面板中单击一个点、一行或一个 token</translation>
    </message>
    <message>
        <source>Give a panel the whole grid, or share it again</source>
        <translation>让一个面板占满网格，或恢复共享</translation>
    </message>
    <message>
        <source>double-click its title</source>
        <translation>双击面板标题</translation>
    </message>
    <message>
        <source>Resize panels</source>
        <translation>调整面板大小</translation>
    </message>
    <message>
        <source>drag the gaps between them</source>
        <translation>拖动面板之间的间隙</translation>
    </message>
</context>
<context>
    <name>SpeculationPanel</name>
    <message>
        <source>Speculation</source>
        <translation>投机解码</translation>
    </message>
    <message>
        <source>A speculative engine lets a cheap draft propose k tokens and the target check them all in one forward, keeping the drafts up to the first it would not have picked, plus its own next token. Top: of the rounds that drafted a token at each position, the share the target kept (a later position is kept only if every one before it was). Bottom: tokens per target forward so far; plain decoding makes one token per forward (dashed line). The tokens are the same as plain decoding&apos;s: only the number of target forwards changes.</source>
        <translation>投机解码引擎让一个廉价的草稿提出 k 个 token，由目标模型在一次前向中全部验证：保留草稿直到第一个它不会选的 token 为止，再加上它自己的下一个 token。上：在各位置起草了 token 的轮次中，被目标模型保留的比例（只有前面每个位置都被保留，后面的位置才会被保留）。下：到目前为止每次目标模型前向得到的 token 数；普通解码每次前向得到一个 token（虚线）。生成的 token 与普通解码完全相同：变的只是目标模型前向的次数。</translation>
    </message>
    <message>
        <source>drafts kept, by position in the round</source>
        <translation>按轮内位置统计的草稿保留率</translation>
    </message>
    <message>
        <source>kept</source>
        <translation>保留</translation>
    </message>
    <message>
        <source>draft position</source>
        <translation>草稿位置</translation>
    </message>
    <message>
        <source>tokens per target forward</source>
        <translation>每次目标模型前向的 token 数</translation>
    </message>
    <message>
        <source>tokens</source>
        <translation>token 数</translation>
    </message>
    <message>
        <source>step</source>
        <translation>步</translation>
    </message>
    <message>
        <source>{engine}: {rate} tokens per target forward, {kept} of drafts kept ({n} drafted)</source>
        <translation>{engine}：每次目标模型前向 {rate} 个 token，草稿保留 {kept}（共起草 {n} 个）</translation>
    </message>
    <message>
        <source>no speculative engine in this run: every engine makes one token per forward</source>
        <translation>本次运行没有投机解码引擎：每个引擎每次前向生成一个 token</translation>
    </message>
    <message>
        <source>plain decoding: 1 token per forward</source>
        <translation>普通解码：每次前向 1 个 token</translation>
    </message>
</context>
<context>
    <name>StatusFields</name>
    <message>
        <source>read {0} GB/s ({1}, 1 thread)</source>
        <translation>读取 {0} GB/s（{1}，1 个线程）</translation>
    </message>
    <message>
        <source>read {0} GB/s ({1}, {2} threads)</source>
        <translation>读取 {0} GB/s（{1}，{2} 个线程）</translation>
    </message>
    <message>
        <source>read {0} GB/s ({1})</source>
        <translation>读取 {0} GB/s（{1}）</translation>
    </message>
    <message>
        <source>copy {0} GB/s ({1})</source>
        <translation>复制 {0} GB/s（{1}）</translation>
    </message>
    <message>
        <source>copy {0} GB/s of {1} GB/s peak ({2})</source>
        <translation>复制 {0} GB/s，峰值 {1} GB/s（{2}）</translation>
    </message>
    <message>
        <source>read {0} GB/s of {1} GB/s peak ({2})</source>
        <translation>读取 {0} GB/s，峰值 {1} GB/s（{2}）</translation>
    </message>
    <message>
        <source>Read: the memory read ceiling a decode step runs against, since every step reads every weight and the K/V it attends over and writes next to nothing: a float32 matrix-vector product over a matrix larger than the last-level cache, at the run&apos;s threads (1 GB = 10^9 B). Copy (a trace saved before the read ceiling was measured): bytes read plus bytes written per second of a memory copy, not a bound on a decode step</source>
        <translation>读取：解码步所受的内存读取上限。每一步都要读取全部权重以及它所关注的 K/V，几乎不写入：以本次运行的线程数，对一个大于末级缓存的矩阵做 float32 矩阵-向量乘（1 GB = 10^9 B）。复制（在测量读取上限之前保存的轨迹）：内存复制每秒读取加写入的字节数，并不是解码步的上限</translation>
    </message>
    <message>
        <source>device {0}, {1}</source>
        <translation>设备 {0}，{1}</translation>
    </message>
    <message>
        <source>model {0}</source>
        <translation>模型 {0}</translation>
    </message>
    <message>
        <source>{0} parameters</source>
        <translation>{0} 参数</translation>
    </message>
    <message>
        <source>KV {0} per token</source>
        <translation>每个 token 的 KV：{0}</translation>
    </message>
    <message>
        <source>kernels {0}</source>
        <translation>内核 {0}</translation>
    </message>
    <message>
        <source> vs </source>
        <translation> 对比 </translation>
    </message>
    <message>
        <source>A kernel comparison: every engine ran its decode steps under each kernel, side by side as lanes ({0})</source>
        <translation>内核对比：每个引擎的解码步都在每个内核下各运行一遍，并排显示为各条通道（{0}）</translation>
    </message>
    <message>
        <source>, </source>
        <translation>、</translation>
    </message>
    <message>
        <source>kernel {0}</source>
        <translation>内核 {0}</translation>
    </message>
    <message>
        <source>The decode kernel: what ran every engine&apos;s decode steps, one for the whole run, so that the engines&apos; times differ by their cache alone</source>
        <translation>解码内核：运行每个引擎解码步的代码，整次运行只用一个，因此各引擎的耗时差异只来自缓存</translation>
    </message>
    <message>
        <source>A trace saved when a run could mix kernels: its engines&apos; decode steps ran on different kernels, so their times differ by kernel as well as by cache</source>
        <translation>这是一次运行还能混用内核时保存的轨迹：各引擎的解码步运行在不同内核上，因此耗时差异既来自缓存，也来自内核</translation>
    </message>
    <message>
        <source>parameters: read when loaded</source>
        <translation>参数量：加载后读取</translation>
    </message>
    <message>
        <source>device memory {0}</source>
        <translation>设备内存 {0}</translation>
    </message>
    <message>
        <source>window {0} core</source>
        <translation>窗口 {0} 核</translation>
    </message>
    <message>
        <source>While the last run stepped ({0} s), this window used {1} s of CPU drawing it: {2} of a core, of the {3} this machine has. The engine runs in a process of its own; where the two share too few cores, its step times read higher than `kvviz bench` measures with no window open.</source>
        <translation>上一次运行逐步推进期间（{0} 秒），本窗口绘制它用了 {1} 秒 CPU：{2} 个核，本机共有 {3} 个。引擎在自己的进程中运行；两者共用的核太少时，引擎的步延迟会高于不开窗口时 `kvviz bench` 测得的数值。</translation>
    </message>
</context>
<context>
    <name>SummaryPanel</name>
    <message>
        <source>Totals over steps 0–{step} ({n} new tokens)</source>
        <translation>第 0–{step} 步累计（{n} 个新 token）</translation>
    </message>
    <message>
        <source>Medians of {n} runs: {totals}</source>
        <translation>{n} 次运行的中位数：{totals}</translation>
    </message>
    <message>
        <source>{totals}, decode kernels {first} and {second}</source>
        <translation>{totals}，解码内核 {first} 与 {second}</translation>
    </message>
    <message>
        <source>{totals}, decode kernel {kernel}</source>
        <translation>{totals}，解码内核 {kernel}</translation>
    </message>
    <message>
        <source>{engine} {low}–{high} (±{pct}%)</source>
        <translation>{engine} {low}–{high}（±{pct}%）</translation>
    </message>
    <message>
        <source>Spread of the {n} runs (lowest–highest total; the table gives the median): {parts}.</source>
        <translation>{n} 次运行的离散程度（最低–最高总时间；表中为中位数）：{parts}。</translation>
    </message>
    <message>
        <source>Work saved: naive computed &lt;b&gt;{naive}&lt;/b&gt; K/V projections so far, a cache &lt;b&gt;{cached}&lt;/b&gt; ({ratio:.1f}× fewer). Each one it skips is a K or V that never changed.</source>
        <translation>省下的工作：到目前为止，朴素引擎计算了 &lt;b&gt;{naive}&lt;/b&gt; 次 K/V 投影，带缓存的引擎只算了 &lt;b&gt;{cached}&lt;/b&gt; 次（少 {ratio:.1f}×）。每省掉一次，都是一个从未改变过的 K 或 V。</translation>
    </message>
    <message>
        <source>{engine} {speedup}× (odd steps {odd}×, even {even}×)</source>
        <translation>{engine} {speedup}×（奇数步 {odd}×，偶数步 {even}×）</translation>
    </message>
    <message>
        <source>, </source>
        <translation>、</translation>
    </message>
    <message>
        <source>{engine} {ms}</source>
        <translation>{engine} {ms}</translation>
    </message>
    <message>
        <source>Decode steps alone, each kernel against {kernel} on the same cache: {parts}. The odd and the even steps cover the same positions: where they part, the machine&apos;s noise moved the figure that much. Prefill (step 0, apart): {prefill}.</source>
        <translation>仅看解码步，每个内核在同一缓存上与 {kernel} 相比：{parts}。奇数步和偶数步覆盖相同的位置：两者相差多少，就是机器噪声让这个数字变动了多少。预填充（第 0 步，单独列出）：{prefill}。</translation>
    </message>
    <message>
        <source>Decode steps alone, against naive: {parts}. The odd and the even steps cover the same positions: where they part, the machine&apos;s noise moved the figure that much. Prefill (step 0, apart): {prefill}.</source>
        <translation>只看解码步，相对 naive：{parts}。奇数步与偶数步覆盖同样的位置：两者相差多少，机器的噪声就让这个数字变动了多少。预填充（第 0 步，单列）：{prefill}。</translation>
    </message>
    <message>
        <source>; </source>
        <translation>；</translation>
    </message>
    <message>
        <source>Decode step: {parts}. Their times differ by kernel as well as by cache.</source>
        <translation>解码步：{parts}。它们的耗时差异既来自缓存，也来自内核。</translation>
    </message>
    <message>
        <source>K/V computed</source>
        <translation>K/V 计算次数</translation>
    </message>
    <message>
        <source>copied</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>gathered</source>
        <translation>gather 拷贝</translation>
    </message>
    <message>
        <source>mean KL</source>
        <translation>平均 KL</translation>
    </message>
    <message>
        <source>of copy</source>
        <translation>占复制带宽</translation>
    </message>
    <message>
        <source>of read ceiling</source>
        <translation>占读取上限</translation>
    </message>
    <message>
        <source>peak cache</source>
        <translation>缓存峰值</translation>
    </message>
    <message>
        <source>read</source>
        <translation>读取</translation>
    </message>
    <message>
        <source>read rate</source>
        <translation>读取速率</translation>
    </message>
    <message>
        <source>speedup</source>
        <translation>加速比</translation>
    </message>
    <message>
        <source>time</source>
        <translation>时间</translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation>token/秒</translation>
    </message>
    <message>
        <source>top-1 same</source>
        <translation>top-1 相同</translation>
    </message>
    <message>
        <source>written</source>
        <translation>写入</translation>
    </message>
    <message>
        <source>{name} ({unit})</source>
        <translation>{name}（{unit}）</translation>
    </message>
    <message>
        <source>{name}
({unit})</source>
        <translation>{name}
（{unit}）</translation>
    </message>
    <message>
        <source>Sum of step latencies (forward, cache update and sampling)</source>
        <translation>各步延迟之和（前向、缓存更新和采样）</translation>
    </message>
    <message>
        <source>New tokens per second of summed step time</source>
        <translation>按各步耗时之和计算的每秒新 token 数</translation>
    </message>
    <message>
        <source>Speedup vs naive: naive&apos;s total time divided by this engine&apos;s</source>
        <translation>相对朴素引擎的加速比：朴素引擎总耗时除以本引擎总耗时</translation>
    </message>
    <message>
        <source>K/V projections, token x layer: naive recomputes the whole sequence every step</source>
        <translation>K/V 投影次数（token × 层）：朴素引擎每步都重算整个序列</translation>
    </message>
    <message>
        <source>Bytes copied: existing cache content moved to a new place (the concat cache&apos;s torch.cat)</source>
        <translation>复制字节数：已有缓存内容被搬到新位置（concat 缓存的 torch.cat）</translation>
    </message>
    <message>
        <source>Bytes written: new K/V stored</source>
        <translation>写入字节数：新存入的 K/V</translation>
    </message>
    <message>
        <source>Bytes gathered: copies made only to feed attention (the paged gather)</source>
        <translation>gather 拷贝字节数：仅为喂给注意力而做的拷贝（分页缓存的 gather）</translation>
    </message>
    <message>
        <source>Largest resident K/V memory</source>
        <translation>常驻 K/V 内存的最大值</translation>
    </message>
    <message>
        <source>Bytes read: the weights and the K/V every step must read from memory (each weight once, the K/V of every position it attends over, at the run&apos;s dtype), summed over the steps</source>
        <translation>读取字节数：每一步都必须从内存读取的权重和 K/V（每个权重读一次，加上它所关注的每个位置的 K/V，按本次运行的数据类型计），对各步求和</translation>
    </message>
    <message>
        <source>Bytes read over the summed step time, in GB/s (10^9 B/s): the memory bandwidth the engine achieved</source>
        <translation>读取字节数除以各步耗时之和，单位 GB/s（10^9 B/s）：引擎实际达到的内存带宽</translation>
    </message>
    <message>
        <source>The read rate as a share of this machine&apos;s measured read ceiling (shown in the status bar; a trace saved before it was measured: the copy bandwidth): how close decode runs to the memory wall</source>
        <translation>读取速率占本机实测读取上限（见状态栏；在测量它之前保存的轨迹：复制带宽）的比例：Decode 离内存墙有多近</translation>
    </message>
    <message>
        <source>Mean KL divergence (nats) of the next-token distribution from the exact engine&apos;s, teacher-forced on its tokens: 0 for an exact cache</source>
        <translation>下一个 token 分布相对精确引擎的平均 KL 散度（nat），以其 token 进行 teacher forcing：精确缓存为 0</translation>
    </message>
    <message>
        <source>Share of steps whose most likely token is the exact engine&apos;s (teacher-forced)</source>
        <translation>最可能 token 与精确引擎相同的步数比例（teacher forcing）</translation>
    </message>
    <message>
        <source>Summary</source>
        <translation>汇总</translation>
    </message>
    <message>
        <source>Totals up to the selected step. Time alone can mislead on a tiny model, where Python overhead dominates each step; the work columns show what the cache saves: K/V projections (O(n²) for naive, one per token for a cache) and bytes copied (O(n²) for the chapter&apos;s torch.cat cache, none for static and paged). The memory wall: the bytes the steps had to read (every weight, and the K/V each attends over), those bytes over their time, and that rate against this machine&apos;s read ceiling; in a panel too short for them these rows step aside (the narration still tells them).</source>
        <translation>截至所选步的累计值。在很小的模型上，每步耗时主要是 Python 开销，只看时间容易误判；工作量各列显示缓存省下了什么：K/V 投影次数（朴素引擎为 O(n²)，有缓存时每个 token 一次）和复制字节数（本章的 torch.cat 缓存为 O(n²)，static 和 paged 为零）。内存墙：各步必须读取的字节数（每个权重，以及每步所关注的 K/V）、这些字节除以耗时得到的速率，以及该速率与本机读取上限之比；面板太矮时这几行会让出位置（叙述栏仍会给出这些数字）。</translation>
    </message>
    <message>
        <source>Speedup vs {kernel}: the same engine&apos;s total time under {kernel} divided by this lane&apos;s</source>
        <translation>相对 {kernel} 的加速比：同一引擎在 {kernel} 下的总时间除以本通道的总时间</translation>
    </message>
    <message>
        <source>Set aside for want of room (the narration tells them): {rows}</source>
        <translation>因空间不足而省略（解说中有）：{rows}</translation>
    </message>
    <message>
        <source>Set aside for want of room: {rows}</source>
        <translation>因空间不足而省去：{rows}</translation>
    </message>
    <message>
        <source> (+{n} rows without room)</source>
        <translation>（另有 {n} 行无处显示）</translation>
    </message>
    <message>
        <source> (+{n} in the narration)</source>
        <translation>（另 {n} 行见解说）</translation>
    </message>
</context>
<context>
    <name>TextPanel</name>
    <message>
        <source>the schedulers generated different text</source>
        <translation>各调度器生成的文本不同</translation>
    </message>
    <message>
        <source>tokens = solo runs: {0} of {1}</source>
        <translation>token = 单独运行：{1} 个中 {0} 个</translation>
    </message>
    <message>
        <source>request {0} from token {1} (step {2})</source>
        <translation>请求 {0} 自第 {1} 个 token 起不同（第 {2} 步）</translation>
    </message>
    <message>
        <source>request {0} from token {1} (cut short)</source>
        <translation>请求 {0} 自第 {1} 个 token 起不同（提前结束）</translation>
    </message>
    <message>
        <source>tokens ≠ solo runs: {0} of {1} equal; {2}</source>
        <translation>token ≠ 单独运行：{1} 个中 {0} 个相同；{2}</translation>
    </message>
    <message>
        <source>{0}: {1} requests</source>
        <translation>{0}：{1} 个请求</translation>
    </message>
    <message>
        <source>Request {0}: its text</source>
        <translation>请求 {0} 的文本</translation>
    </message>
    <message>
        <source>The selected request&apos;s prompt and what each scheduler has generated for it so far. Click a cell of the timeline or a block of the pool to choose the request.</source>
        <translation>所选请求的提示，以及各调度器到目前为止为它生成的内容。点击时间线上的格子或块池中的块来选择请求。</translation>
    </message>
</context>
<context>
    <name>TimelinePanel</name>
    <message>
        <source>not arrived</source>
        <translation>未到达</translation>
    </message>
    <message>
        <source>waiting</source>
        <translation>等待</translation>
    </message>
    <message>
        <source>prefill</source>
        <translation>预填充</translation>
    </message>
    <message>
        <source>decode</source>
        <translation>解码</translation>
    </message>
    <message>
        <source>padding</source>
        <translation>填充</translation>
    </message>
    <message>
        <source>idle slot</source>
        <translation>空闲槽位</translation>
    </message>
    <message>
        <source>preempted</source>
        <translation>被抢占</translation>
    </message>
    <message>
        <source>finished</source>
        <translation>已完成</translation>
    </message>
    <message>
        <source>vLLM failed: {0}</source>
        <translation>vLLM 失败：{0}</translation>
    </message>
    <message>
        <source>vLLM: starting, {0:.0f} s waited (its start-up takes 35-50 s on a CPU)</source>
        <translation>vLLM：启动中，已等待 {0:.0f} 秒（在 CPU 上启动需 35-50 秒）</translation>
    </message>
    <message>
        <source>vLLM, step {0}: {1} running, {2} waiting, {3} blocks in use, {4} prompt tokens from its cache, {5} preempted</source>
        <translation>vLLM，第 {0} 步：{1} 个运行中，{2} 个等待，{3} 个块在用，{4} 个提示 token 来自其缓存，{5} 个被抢占</translation>
    </message>
    <message>
        <source>{0}: {1} padding + {2} idle slots wasted, {3} steps</source>
        <translation>{0}：浪费 {1} 个填充 + {2} 个空闲槽位，共 {3} 步</translation>
    </message>
    <message>
        <source>Request timeline</source>
        <translation>请求时间线</translation>
    </message>
    <message>
        <source>Request timeline: wasted slots {0}</source>
        <translation>请求时间线：浪费的槽位 {0}</translation>
    </message>
    <message>
        <source>a step over {0} slots drawn in {0} columns</source>
        <translation>超过 {0} 个槽位的步画成 {0} 列</translation>
    </message>
    <message>
        <source>vLLM {0}: {1} running, {2} waiting, {3} blocks, {4} cached, {5} preempted</source>
        <translation>vLLM 第 {0} 步：{1} 运行，{2} 等待，{3} 块，{4} 已缓存，{5} 被抢占</translation>
    </message>
    <message>
        <source>A row per request, a column per token slot of each step: what the request&apos;s slot did. Padding and idle slots are computed and thrown away (static batching). Click a cell to select that request and step.</source>
        <translation>每行一个请求，每列是某一步中的一个 token 槽位：该请求的槽位做了什么。填充和空闲槽位算了又扔掉（静态批处理）。点击格子选择该请求和该步。</translation>
    </message>
    <message>
        <source>no run yet</source>
        <translation>尚未运行</translation>
    </message>
    <message>
        <source>{0}: request {1}, step {2}: {3}</source>
        <translation>{0}：请求 {1}，第 {2} 步：{3}</translation>
    </message>
</context>
<context>
    <name>TimingPanel</name>
    <message>
        <source>Time to first token and inter-token latency</source>
        <translation>首 token 延迟与 token 间延迟</translation>
    </message>
    <message>
        <source>The mean of the server&apos;s time_to_first_token_seconds (above) and inter_token_latency_seconds (below) over each sample&apos;s interval (the histogram&apos;s sum over its count); no point where no token came.</source>
        <translation>每个采样区间内服务器的 time_to_first_token_seconds（上）和 inter_token_latency_seconds（下）的平均值（直方图的总和除以计数）；没有 token 产生的区间不画点。</translation>
    </message>
    <message>
        <source>TTFT</source>
        <translation>TTFT</translation>
    </message>
    <message>
        <source>ITL</source>
        <translation>ITL</translation>
    </message>
    <message>
        <source>seconds</source>
        <translation>秒</translation>
    </message>
</context>
<context>
    <name>TokenStreamPanel</name>
    <message>
        <source>differs from {first} from step {step}</source>
        <translation>从第 {step} 步起与 {first} 不同</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>steps {first}-{last}</source>
        <translation>第 {first}-{last} 步</translation>
    </message>
    <message>
        <source>step {step}</source>
        <translation>第 {step} 步</translation>
    </message>
    <message>
        <source> … {n} prompt tokens not shown … </source>
        <translation> … 未显示 {n} 个提示 token … </translation>
    </message>
    <message>
        <source>Type a prompt and press Run (Ctrl+R): each engine&apos;s tokens appear here, one per step.</source>
        <translation>输入 prompt 后按“运行”（Ctrl+R）：每个引擎生成的 token 会在这里逐步出现。</translation>
    </message>
    <message>
        <source>Token stream</source>
        <translation>token 流</translation>
    </message>
    <message>
        <source>The prompt (grey) and the tokens each engine generated, one per step (alternating shades). A character made of several tokens (bytes of one character, or pieces of it) is drawn once, shaded green or blue; its tooltip lists each token&apos;s id and bytes. The selected step&apos;s token is highlighted; later tokens are faded. Every engine should write exactly the same tokens: a KV cache is an optimisation and changes no math. A token that differs from the first engine&apos;s is underlined in red.</source>
        <translation>prompt（灰色）以及每个引擎生成的 token，每步一个（深浅交替）。由多个 token 组成的字符（一个字符的各个字节，或它的几个片段）只画一次，以绿色或蓝色底纹标出；其提示框列出每个 token 的 id 和字节。所选步的 token 高亮显示，之后的 token 变淡。所有引擎生成的 token 应当完全相同：KV Cache 只是优化，不改变数学结果。与第一个引擎不同的 token 会用红色下划线标出。</translation>
    </message>
</context>
<context>
    <name>TransportBar</name>
    <message>
        <source>Step</source>
        <translation>步</translation>
    </message>
    <message>
        <source>Scrub through the recorded steps (Left/Right, Home/End)</source>
        <translation>拖动浏览已记录的步骤（←/→，Home/End）</translation>
    </message>
    <message>
        <source>Whether the engines&apos; tokens so far are the same</source>
        <translation>各引擎到目前为止生成的 token 是否相同</translation>
    </message>
    <message>
        <source>{0}, about {1} left</source>
        <translation>{0}，约剩 {1}</translation>
    </message>
    <message>
        <source>{0} / {1} steps</source>
        <translation>{0} / {1} 步</translation>
    </message>
    <message>
        <source>one engine</source>
        <translation>单个引擎</translation>
    </message>
    <message>
        <source>identical</source>
        <translation>完全一致</translation>
    </message>
    <message>
        <source>differ at step {0}</source>
        <translation>第 {0} 步出现差异</translation>
    </message>
    <message>
        <source>no steps yet: Run (Ctrl+R)</source>
        <translation>还没有步骤：运行（Ctrl+R）</translation>
    </message>
    <message>
        <source>prefill</source>
        <translation>预填充</translation>
    </message>
    <message>
        <source>decode</source>
        <translation>解码</translation>
    </message>
    <message>
        <source>step {0} / {1}  {2}</source>
        <translation>第 {0} / {1} 步  {2}</translation>
    </message>
    <message>
        <source>loading {0}...</source>
        <translation>正在加载 {0}...</translation>
    </message>
    <message>
        <source>Loading the model (PyTorch reads its weights)</source>
        <translation>正在加载模型（PyTorch 读取权重）</translation>
    </message>
    <message>
        <source>{0}, paused</source>
        <translation>{0}，已暂停</translation>
    </message>
    <message>
        <source>Time left from this run&apos;s measured step times (and the Speed control)</source>
        <translation>剩余时间由本次运行实测的每步耗时（及速度设置）估算</translation>
    </message>
    <message>
        <source>replay: {0}</source>
        <translation>回放：{0}</translation>
    </message>
    <message>
        <source>The panels show a saved run of {0} ({1}, {2}); Run starts a new one from the form.</source>
        <translation>面板显示的是已保存的 {0} 运行（{1}，{2}）；点击“运行”按表单开始新的运行。</translation>
    </message>
    <message>
        <source>last run: {0}</source>
        <translation>上次运行：{0}</translation>
    </message>
    <message>
        <source>The panels show the last run, of {0} ({1}, {2}); the form now asks for another model, device, dtype or decode kernel: Run to see it.</source>
        <translation>面板显示的是上次 {0} 的运行（{1}，{2}）；表单现在选择了另一个模型、设备、数据类型或解码内核：点击“运行”查看。</translation>
    </message>
</context>
<context>
    <name>TransportToolbar</name>
    <message>
        <source> Speed </source>
        <translation> 速度 </translation>
    </message>
    <message>
        <source> steps/s</source>
        <translation> 步/秒</translation>
    </message>
    <message>
        <source>as fast as possible</source>
        <translation>尽可能快</translation>
    </message>
    <message>
        <source>Lockstep rounds per second ([ slower, ] faster)</source>
        <translation>每秒同步推进的轮数（[ 减慢，] 加快）</translation>
    </message>
    <message>
        <source>Transport</source>
        <translation>运行控制</translation>
    </message>
    <message>
        <source>idle</source>
        <translation>空闲</translation>
    </message>
    <message>
        <source>loading the model...</source>
        <translation>正在加载模型...</translation>
    </message>
    <message>
        <source>running</source>
        <translation>运行中</translation>
    </message>
    <message>
        <source>paused</source>
        <translation>已暂停</translation>
    </message>
</context>
<context>
    <name>TreePanel</name>
    <message>
        <source>Prefix cache (vLLM&apos;s blocks, as a tree of hash chains)</source>
        <translation>前缀缓存（vLLM 的块，画成哈希链组成的树）</translation>
    </message>
    <message>
        <source>The blocks the server holds in its prefix cache, mirrored from its KV events (stored minus removed). A block&apos;s hash chains its parent&apos;s, so requests sharing a prompt share its blocks: one trunk (dark) with a branch (light) per request. Left to right: block depth in the chain. With a tokenizer (--model) each box shows its blocks&apos; tokens.</source>
        <translation>服务器前缀缓存中保存的块，根据它的 KV 事件镜像得到（存入减去移除）。每个块的哈希链接其父块的哈希，因此共享同一提示的请求共享这些块：一根主干（深色），每个请求一条分支（浅色）。从左到右：块在链中的深度。指定分词器（--model）时，每个方框显示其块中的 token。</translation>
    </message>
    <message>
        <source> rank {0}</source>
        <translation> 第 {0} 号 rank</translation>
    </message>
    <message>
        <source> ({0} short branches not drawn)</source>
        <translation>（{0} 条短分支未画出）</translation>
    </message>
</context>
<context>
    <name>UsagePanel</name>
    <message>
        <source>Pool use and batch size</source>
        <translation>块池占用与批次大小</translation>
    </message>
    <message>
        <source>blocks used</source>
        <translation>已用块数</translation>
    </message>
    <message>
        <source>batch</source>
        <translation>批次</translation>
    </message>
    <message>
        <source>step</source>
        <translation>步</translation>
    </message>
    <message>
        <source>Above: KV blocks held by some request after each step (of the pool&apos;s size); a cross is a preemption. Below: requests computed in each step (the batch). One line per scheduler; vLLM&apos;s: the blocks in use and the requests running it reported.</source>
        <translation>上：每步之后被请求持有的 KV 块数（相对于池的大小）；叉号表示一次抢占。下：每步计算的请求数（批次）。每个调度器一条线；vLLM 的线是它报告的在用块数和运行中的请求数。</translation>
    </message>
</context>
<context>
    <name>WatchCountersPanel</name>
    <message>
        <source>Per server, over the samples kept: prefix hits (prompt tokens found in the prefix cache over those looked up), tokens saved (found cached) and prefilled (computed), preemptions, tokens generated (one TTFT or ITL observation each) and per second, the most pool blocks in use.</source>
        <translation>每个服务器在保留的采样上：前缀命中（在前缀缓存中命中的提示 token 占查询数的比例）、省下的 token（命中缓存的）与已预填充（实际计算的）、抢占次数、生成的 token 数（每个对应一次 TTFT 或 ITL 观测）与每秒 token 数，以及块池同时在用的最多块数。</translation>
    </message>
</context>
<context>
    <name>WatchDialog</name>
    <message>
        <source>Watch a vLLM server</source>
        <translation>监控 vLLM 服务器</translation>
    </message>
    <message>
        <source>One URL per server, separated by spaces: several are drawn side by side</source>
        <translation>每个服务器一个 URL，用空格分隔：多个服务器并排绘制</translation>
    </message>
    <message>
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <source>Data-parallel ranks per server: rank r&apos;s event ports are offset by r</source>
        <translation>每个服务器的数据并行 rank 数：rank r 的事件端口偏移 r</translation>
    </message>
    <message>
        <source>every topic</source>
        <translation>所有主题</translation>
    </message>
    <message>
        <source>Sent as the Authorization header with each GET /metrics; never saved</source>
        <translation>随每次 GET /metrics 作为 Authorization 请求头发送；从不保存</translation>
    </message>
    <message>
        <source>https without checking the server&apos;s certificate</source>
        <translation>使用 https，但不校验服务器证书</translation>
    </message>
    <message>
        <source>not recorded</source>
        <translation>不录制</translation>
    </message>
    <message>
        <source>Browse...</source>
        <translation>浏览...</translation>
    </message>
    <message>
        <source>none: blocks drawn without their text</source>
        <translation>无：绘制块但不显示其文本</translation>
    </message>
    <message>
        <source>The server&apos;s tokenizer (a model folder or a preset): each block&apos;s tokens shown as text</source>
        <translation>服务器的分词器（模型文件夹或预设）：把每个块的 token 显示为文本</translation>
    </message>
    <message>
        <source>Server URLs</source>
        <translation>服务器 URL</translation>
    </message>
    <message>
        <source>KV events port</source>
        <translation>KV 事件端口</translation>
    </message>
    <message>
        <source>Replay port</source>
        <translation>重放端口</translation>
    </message>
    <message>
        <source>Ranks</source>
        <translation>Rank 数</translation>
    </message>
    <message>
        <source>Event topic</source>
        <translation>事件主题</translation>
    </message>
    <message>
        <source>Authorization</source>
        <translation>授权</translation>
    </message>
    <message>
        <source>Record to</source>
        <translation>录制到</translation>
    </message>
    <message>
        <source>Tokenizer</source>
        <translation>分词器</translation>
    </message>
    <message>
        <source>Watch</source>
        <translation>监控</translation>
    </message>
    <message>
        <source>Record the watch to</source>
        <translation>把监控录制到</translation>
    </message>
    <message>
        <source>Watch recordings (*.kvwatch)</source>
        <translation>监控录制文件 (*.kvwatch)</translation>
    </message>
</context>
<context>
    <name>WatchExports</name>
    <message>
        <source>View as PNG...</source>
        <translation>视图导出为 PNG...</translation>
    </message>
    <message>
        <source>View as SVG...</source>
        <translation>视图导出为 SVG...</translation>
    </message>
    <message>
        <source>Recording as a page...</source>
        <translation>录制导出为网页...</translation>
    </message>
    <message>
        <source>Recording as GIF or MP4...</source>
        <translation>录制导出为 GIF 或 MP4...</translation>
    </message>
    <message>
        <source>Export</source>
        <translation>导出</translation>
    </message>
    <message>
        <source>saved {0}</source>
        <translation>已保存 {0}</translation>
    </message>
    <message>
        <source>nothing to export: watch a server or open a recording first</source>
        <translation>没有可导出的内容：请先监控一个服务器，或打开一份录制</translation>
    </message>
    <message>
        <source>the page and the animation are made from a recording: Stop the watch first (its recording closes), or replay one</source>
        <translation>网页和动画由录制文件生成：请先停止监控（其录制随之关闭），或回放一份录制</translation>
    </message>
    <message>
        <source>the page and the animation are made from a recording: watch with &apos;Record to&apos;, or open a recording</source>
        <translation>网页和动画由录制文件生成：请在监控时设置“录制到”，或打开一份录制</translation>
    </message>
</context>
<context>
    <name>WatchTransport</name>
    <message>
        <source>Time</source>
        <translation>时间</translation>
    </message>
    <message>
        <source>Scrub through the samples (Left/Right, Home/End: follow the newest)</source>
        <translation>拖动浏览各次采样（Left/Right，Home/End：跟随最新）</translation>
    </message>
    <message>
        <source>{0}: {1:.0f} s, sample {2} / {3}</source>
        <translation>{0}：{1:.0f} 秒，第 {2} / {3} 次采样</translation>
    </message>
    <message>
        <source>{0}: no sample yet</source>
        <translation>{0}：尚无采样</translation>
    </message>
    <message>
        <source> · {0} malformed frames, {1} gaps, {2} batches lost, {3} bad /metrics pages</source>
        <translation> · {0} 个格式错误的帧，{1} 处缺口，丢失 {2} 批，{3} 个无效 /metrics 页面</translation>
    </message>
    <message>
        <source> · {0} · {1:,} event frames, {2:,} samples, {3:,} blocks mirrored</source>
        <translation> · {0} · {1:,} 个事件帧，{2:,} 个采样，镜像 {3:,} 个块</translation>
    </message>
    <message>
        <source>[{0:.0f} s] {1}.</source>
        <translation>[{0:.0f} 秒] {1}。</translation>
    </message>
    <message>
        <source>metrics + events</source>
        <translation>指标 + 事件</translation>
    </message>
    <message>
        <source>metrics only (no KV event received)</source>
        <translation>只有指标（未收到 KV 事件）</translation>
    </message>
    <message>
        <source>events only (/metrics not answering)</source>
        <translation>只有事件（/metrics 未应答）</translation>
    </message>
    <message>
        <source>nothing received yet</source>
        <translation>尚未收到任何数据</translation>
    </message>
</context>
<context>
    <name>WatchUsagePanel</name>
    <message>
        <source>Pool use and running requests</source>
        <translation>块池占用与运行中的请求</translation>
    </message>
    <message>
        <source>Above: KV blocks in use on each server (vLLM&apos;s kv_cache_usage_perc times its pool); a cross marks a sample in which requests were preempted. Below: requests running. Over the seconds since the watch began, a line per server.</source>
        <translation>上：各服务器在用的 KV 块数（vLLM 的 kv_cache_usage_perc 乘以其块池大小）；叉号标出有请求被抢占的采样。下：运行中的请求数。横轴为监控开始以来的秒数，每个服务器一条线。</translation>
    </message>
    <message>
        <source>running</source>
        <translation>运行中</translation>
    </message>
    <message>
        <source>seconds</source>
        <translation>秒</translation>
    </message>
</context>
<context>
    <name>WatchWindow</name>
    <message>
        <source>kvviz: watching vLLM</source>
        <translation>kvviz：监控 vLLM</translation>
    </message>
    <message>
        <source>&amp;Watch again</source>
        <translation>重新监控(&amp;W)</translation>
    </message>
    <message>
        <source>&amp;Step one sample</source>
        <translation>前进一次采样(&amp;S)</translation>
    </message>
    <message>
        <source>S&amp;top</source>
        <translation>停止(&amp;T)</translation>
    </message>
    <message>
        <source>Previous sample</source>
        <translation>上一次采样</translation>
    </message>
    <message>
        <source>Next sample</source>
        <translation>下一次采样</translation>
    </message>
    <message>
        <source>Back 10 samples</source>
        <translation>后退 10 次采样</translation>
    </message>
    <message>
        <source>Forward 10 samples</source>
        <translation>前进 10 次采样</translation>
    </message>
    <message>
        <source>First sample</source>
        <translation>第一次采样</translation>
    </message>
    <message>
        <source>Newest sample (follow)</source>
        <translation>最新采样（跟随）</translation>
    </message>
    <message>
        <source>Watch a server...</source>
        <translation>监控服务器...</translation>
    </message>
    <message>
        <source>Open a recording...</source>
        <translation>打开录制...</translation>
    </message>
    <message>
        <source>&amp;Close</source>
        <translation>关闭(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;Quit kvviz</source>
        <translation>退出 kvviz(&amp;Q)</translation>
    </message>
    <message>
        <source>Watch the same servers again, or replay the recording from its start (Ctrl+R)</source>
        <translation>重新监控相同的服务器，或从头回放录制 (Ctrl+R)</translation>
    </message>
    <message>
        <source> samples/s</source>
        <translation> 次采样/秒</translation>
    </message>
    <message>
        <source>A recording replayed at this many metric samples per second ([ slower, ] faster); a live server comes at its own pace</source>
        <translation>回放录制时每秒播放的指标采样数（[ 减慢，] 加快）；实时服务器按其自身节奏到来</translation>
    </message>
    <message>
        <source>watching {0}</source>
        <translation>正在监控 {0}</translation>
    </message>
    <message>
        <source>replaying {0} ({1} samples)</source>
        <translation>正在回放 {0}（{1} 次采样）</translation>
    </message>
    <message>
        <source>recorded to {0}</source>
        <translation>已录制到 {0}</translation>
    </message>
    <message>
        <source>{0} ends inside a record (a session cut short): replayed up to there</source>
        <translation>{0} 在一条记录中间结束（会话被中断）：已回放到该处</translation>
    </message>
    <message>
        <source>live</source>
        <translation>实时</translation>
    </message>
    <message>
        <source>replay</source>
        <translation>回放</translation>
    </message>
    <message>
        <source>Open a watch recording</source>
        <translation>打开监控录制</translation>
    </message>
    <message>
        <source>Watch recordings (*.kvwatch);;All files (*)</source>
        <translation>监控录制文件 (*.kvwatch);;所有文件 (*)</translation>
    </message>
</context>
<context>
    <name>WorkMatrixPanel</name>
    <message>
        <source>prefill, {rows} rows</source>
        <translation>预填充，{rows} 行</translation>
    </message>
    <message>
        <source>accepted draft, no forward</source>
        <translation>已接受的草稿，无前向</translation>
    </message>
    <message>
        <source>{rows} rows verified, {kept} kept</source>
        <translation>验证了 {rows} 行，保留 {kept} 行</translation>
    </message>
    <message>
        <source>{rows} rows, {again} again</source>
        <translation>{rows} 行，其中 {again} 行重算</translation>
    </message>
    <message>
        <source>{rows} row, {cached} cached</source>
        <translation>{rows} 行，{cached} 个来自缓存</translation>
    </message>
    <message>
        <source>computed this step (new)</source>
        <translation>本步计算（新）</translation>
    </message>
    <message>
        <source>read from the cache</source>
        <translation>从缓存读取</translation>
    </message>
    <message>
        <source>recomputed though unchanged</source>
        <translation>未变却被重算</translation>
    </message>
    <message>
        <source>masked (future)</source>
        <translation>被掩码屏蔽（未来）</translation>
    </message>
    <message>
        <source>evicted, never read again</source>
        <translation>已驱逐，不再读取</translation>
    </message>
    <message>
        <source>drafted, accepted</source>
        <translation>已起草，被接受</translation>
    </message>
    <message>
        <source>drafted, rejected: left in place</source>
        <translation>已起草，被拒绝：原地保留</translation>
    </message>
    <message>
        <source>drafted, rejected: freed</source>
        <translation>已起草，被拒绝：已释放</translation>
    </message>
    <message>
        <source>written over a rejected slot</source>
        <translation>覆盖写入被拒绝的槽位</translation>
    </message>
    <message>
        <source>not computed this step</source>
        <translation>本步未计算</translation>
    </message>
    <message>
        <source>key position</source>
        <translation>key 位置</translation>
    </message>
    <message>
        <source>query position</source>
        <translation>query 位置</translation>
    </message>
    <message>
        <source>this step ▾</source>
        <translation>本步 ▾</translation>
    </message>
    <message>
        <source>Work matrix</source>
        <translation>工作矩阵</translation>
    </message>
    <message>
        <source>Rows are query positions, columns key positions; each cell shows what happened at the selected step. Naive recomputes every row&apos;s K/V each step although they never change (red); a cache computes one new row (gold) and reads the other keys from memory (blue). The scores of the new row against every key are still computed: the cache saves the K/V projections, not the attention itself. The frame marks the rows computed at this step; dotted lines mark the end of the prompt.</source>
        <translation>行是 query 位置，列是 key 位置；每个格子表示所选这一步发生了什么。朴素引擎每步都重算每一行的 K/V，尽管它们从未改变（红色）；有缓存时只计算新的一行（金色），其余 key 从内存读取（蓝色）。新一行对每个 key 的注意力分数仍然要算：缓存省下的是 K/V 投影，而不是注意力本身。方框标出本步计算的行；虚线标出 prompt 的结尾。</translation>
    </message>
</context>
<context>
    <name>engines</name>
    <message>
        <source>no cache: every step re-runs the whole sequence</source>
        <translation>无缓存：每步都重跑整个序列</translation>
    </message>
    <message>
        <source>the chapter&apos;s cache: torch.cat copies the whole history every step</source>
        <translation>本章的缓存：torch.cat 每步复制全部历史</translation>
    </message>
    <message>
        <source>preallocated to the run&apos;s length; new K/V written in place</source>
        <translation>按本次运行的长度预分配；新的 K/V 原地写入</translation>
    </message>
    <message>
        <source>fixed-size blocks from a pool, a block table per sequence</source>
        <translation>从块池分配固定大小的块，每个序列一张块表</translation>
    </message>
    <message>
        <source>only the last W tokens kept (Mistral): memory stops at W, older tokens are dropped</source>
        <translation>只保留最近 W 个 token（Mistral）：内存止于 W，更早的 token 被丢弃</translation>
    </message>
    <message>
        <source>the first S tokens kept for ever plus the last W - S (StreamingLLM)</source>
        <translation>永久保留前 S 个 token，外加最近 W - S 个（StreamingLLM）</translation>
    </message>
    <message>
        <source>K/V stored as int8 with a scale per token and head, dequantised for attention</source>
        <translation>K/V 以 int8 存储，每个 token 和头一个缩放因子，注意力计算前反量化</translation>
    </message>
    <message>
        <source>W tokens kept; when full, the one the last query attended to least goes (TOVA)</source>
        <translation>保留 W 个 token；满了之后，移除最近一个 query 关注最少的那个（TOVA）</translation>
    </message>
    <message>
        <source>W tokens kept: the newest W/2, and the heavy hitters, most attention received so far (H2O)</source>
        <translation>保留 W 个 token：最新的 W/2 个，加上到目前为止获得注意力最多的重要 token（heavy hitter，H2O）</translation>
    </message>
    <message>
        <source>W tokens kept; when full, the key with the largest norm goes (no attention needed)</source>
        <translation>保留 W 个 token；满了之后，移除范数最大的 key（不需要注意力权重）</translation>
    </message>
    <message>
        <source>a prompt longer than W cut once to W by its last queries&apos; attention (SnapKV); every new token kept</source>
        <translation>长于 W 的提示按其最后几个 query 的注意力一次性裁剪到 W（SnapKV）；每个新 token 都保留</translation>
    </message>
    <message>
        <source>speculative: prompt lookup drafts k tokens from n-grams of the text so far, the target verifies them in one forward, rejected K/V rolled back</source>
        <translation>投机解码：prompt lookup 从已有文本的 n-gram 中起草 k 个 token，目标模型在一次前向中验证它们，被拒绝的 K/V 回滚</translation>
    </message>
    <message>
        <source>speculative: a small draft model proposes k tokens, the target verifies them in one forward, rejected K/V rolled back in both caches</source>
        <translation>投机解码：小型草稿模型提出 k 个 token，目标模型在一次前向中验证它们，被拒绝的 K/V 在两个缓存中都回滚</translation>
    </message>
</context>
<context>
    <name>kernels</name>
    <message>
        <source>{engine} cannot decode with the {label} kernel (--kernel {kernel}); {engine} decodes with {kernels}</source>
        <translation>{engine} 不能用 {label} 内核解码（--kernel {kernel}）；{engine} 可用的内核：{kernels}</translation>
    </message>
    <message>
        <source>PyTorch</source>
        <translation>PyTorch</translation>
    </message>
    <message>
        <source>PyTorch&apos;s ops, one call per operation: what the course&apos;s code runs</source>
        <translation>PyTorch 的算子，每个运算一次调用：课程代码运行的就是它</translation>
    </message>
    <message>
        <source>C step</source>
        <translation>C 解码步</translation>
    </message>
    <message>
        <source>kvviz&apos;s C step: a whole decode step in one C call, each matrix read once (CPU, float32, Llama-family models)</source>
        <translation>kvviz 的 C 解码步：整个解码步一次 C 调用，每个矩阵只读一次（CPU、float32、Llama 系列模型）</translation>
    </message>
    <message>
        <source>OpenBLAS</source>
        <translation>OpenBLAS</translation>
    </message>
    <message>
        <source>every projection through numpy&apos;s OpenBLAS, the rest PyTorch&apos;s ops (CPU, float32, Llama-family models)</source>
        <translation>每个投影都经由 numpy 的 OpenBLAS，其余用 PyTorch 的算子（CPU、float32、Llama 系列模型）</translation>
    </message>
    <message>
        <source>torch.compile</source>
        <translation>torch.compile</translation>
    </message>
    <message>
        <source>the static cache&apos;s fixed-shape decode step compiled by torch.compile (the compile happens before the first step)</source>
        <translation>static 缓存固定形状的解码步由 torch.compile 编译（编译在第一步之前完成）</translation>
    </message>
    <message>
        <source>CUDA graph</source>
        <translation>CUDA 图</translation>
    </message>
    <message>
        <source>the static cache&apos;s fixed-shape decode step captured once as a CUDA graph and replayed</source>
        <translation>static 缓存固定形状的解码步一次捕获为 CUDA 图，之后重放</translation>
    </message>
</context>
</TS>
