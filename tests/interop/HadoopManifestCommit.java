/*
 * Drives Hadoop's own ManifestCommitter on the local file system for dataferry's interop tests
 * (tests/interop/test_hadoop_manifest.py). One JVM launch does all the work of one mode:
 *
 *   tasks DEST JOB_ID JOB_UUID SPEC     set up the job, then for each task in SPEC (lines
 *                                       "<task index>\t<relative path>") write its files into
 *                                       the task attempt directory (content "<index>:<path>",
 *                                       UTF-8) and commit the task; prints
 *                                       "task\t<task id>\t<attempt id>" per committed task
 *   commit DEST JOB_ID JOB_UUID         commit the job from the manifests in its manifest dir
 *   read-success FILE                   load a _SUCCESS, print "file\t<decoded path>" each
 *   read-manifest FILE                  load a task manifest, print "dest\t<decoded path>" and
 *                                       "dir\t<decoded path>" for its entries
 *   encode DEST NAMES                   print "uri\t<URI Hadoop writes for DEST/<name>>" for
 *                                       each line of the NAMES file (UTF-8)
 *
 * Several modes may follow each other on one command line, separated by "--". DEST is an
 * absolute local directory; the job's UUID is passed as spark.sql.sources.writeJobUUID, as
 * Spark does, and the job attempt is 0 (mapreduce.job.application.attempt.id).
 */

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.DirEntry;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.FileEntry;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.ManifestSuccessData;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest;
import org.apache.hadoop.mapreduce.task.JobContextImpl;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;

public final class HadoopManifestCommit {

  private static final PrintStream OUT =
      new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private HadoopManifestCommit() {
  }

  public static void main(String[] args) throws Exception {
    List<String> current = new ArrayList<>();
    for (String arg : args) {
      if (arg.equals("--")) {
        run(current);
        current = new ArrayList<>();
      } else {
        current.add(arg);
      }
    }
    if (!current.isEmpty()) {
      run(current);
    }
  }

  private static void run(List<String> a) throws Exception {
    switch (a.get(0)) {
      case "tasks":
        writeAndCommitTasks(localDir(a.get(1)), a.get(2), a.get(3), a.get(4));
        break;
      case "commit":
        commitJob(localDir(a.get(1)), a.get(2), a.get(3));
        break;
      case "read-success":
        readSuccess(localDir(a.get(1)));
        break;
      case "read-manifest":
        readManifest(localDir(a.get(1)));
        break;
      case "encode":
        encode(a.get(1), a.get(2));
        break;
      default:
        throw new IllegalArgumentException("unknown mode " + a);
    }
  }

  /** A local path as Hadoop qualifies one: file:/abs/path, the string taken literally. */
  private static Path localDir(String absolute) {
    return new Path("file", null, absolute);
  }

  /** The configuration Spark gives a manifest committer job on the local file system. */
  private static Configuration conf(String jobUuid) {
    Configuration conf = new Configuration();
    // no .crc side files: the output is compared file by file with dataferry's
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    conf.setBoolean("fs.file.impl.disable.cache", true);
    conf.set("spark.sql.sources.writeJobUUID", jobUuid);
    conf.setInt("mapreduce.job.application.attempt.id", 0);
    return conf;
  }

  /** The task attempt context a driver uses for job setup and commit (Spark: task 0). */
  private static TaskAttemptContext driverContext(Configuration conf, JobID job) {
    return new TaskAttemptContextImpl(conf, new TaskAttemptID(new TaskID(job, TaskType.MAP, 0), 0));
  }

  private static void writeAndCommitTasks(Path dest, String jobId, String jobUuid, String spec)
      throws IOException {
    Configuration conf = conf(jobUuid);
    JobID job = JobID.forName(jobId);
    JobContext jobContext = new JobContextImpl(conf, job);
    new ManifestCommitter(dest, driverContext(conf, job)).setupJob(jobContext);

    Map<Integer, List<String>> tasks = new TreeMap<>();
    for (String line : Files.readAllLines(Paths.get(spec), StandardCharsets.UTF_8)) {
      if (line.isEmpty()) {
        continue;
      }
      String[] parts = line.split("\t", 2);
      tasks.computeIfAbsent(Integer.parseInt(parts[0]), k -> new ArrayList<>()).add(parts[1]);
    }
    FileSystem fs = dest.getFileSystem(conf);
    for (Map.Entry<Integer, List<String>> task : tasks.entrySet()) {
      TaskAttemptID attempt = new TaskAttemptID(new TaskID(job, TaskType.MAP, task.getKey()), 0);
      TaskAttemptContext context = new TaskAttemptContextImpl(conf, attempt);
      ManifestCommitter committer = new ManifestCommitter(dest, context);
      committer.setupTask(context);
      String work = committer.getWorkPath().toUri().getPath();
      for (String relative : task.getValue()) {
        Path file = new Path("file", null, work + "/" + relative);
        byte[] data = (task.getKey() + ":" + relative).getBytes(StandardCharsets.UTF_8);
        try (OutputStream out = fs.create(file, false)) {
          out.write(data);
        }
      }
      if (committer.needsTaskCommit(context)) {
        committer.commitTask(context);
      }
      OUT.println("task\t" + attempt.getTaskID() + "\t" + attempt);
    }
  }

  private static void commitJob(Path dest, String jobId, String jobUuid) throws IOException {
    Configuration conf = conf(jobUuid);
    JobID job = JobID.forName(jobId);
    new ManifestCommitter(dest, driverContext(conf, job)).commitJob(new JobContextImpl(conf, job));
    OUT.println("committed\t" + dest.toUri().getPath());
  }

  private static void readSuccess(Path file) throws IOException {
    FileSystem fs = file.getFileSystem(conf(""));
    ManifestSuccessData success = ManifestSuccessData.load(fs, file);
    for (Path p : success.getFilenamePaths()) {
      OUT.println("file\t" + p.toUri().getPath());
    }
  }

  private static void readManifest(Path file) throws IOException {
    FileSystem fs = file.getFileSystem(conf(""));
    TaskManifest manifest = TaskManifest.load(fs, file);
    for (FileEntry f : manifest.getFilesToCommit()) {
      OUT.println("dest\t" + f.getDestPath().toUri().getPath());
    }
    for (DirEntry d : manifest.getDestDirectories()) {
      OUT.println("dir\t" + d.getDestPath().toUri().getPath());
    }
  }

  private static void encode(String dest, String names) throws IOException {
    for (String name : Files.readAllLines(Paths.get(names), StandardCharsets.UTF_8)) {
      OUT.println("uri\t" + new Path("file", null, dest + "/" + name).toUri().toString());
    }
  }
}
